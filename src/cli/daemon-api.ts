import type { AppConfig } from '../config/app-config.js';

/** A problem+json answer of the daemon (or no answer: status 0). */
export class DaemonApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly field: string | undefined,
  ) {
    super(detail);
  }
}

/** The daemon's API at MENU_SYNC_URL, with MENU_SYNC_TOKEN as the bearer token (as kubectl talks to its server). */
export class DaemonApi {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string | undefined,
  ) {}

  static fromConfig(config: AppConfig): DaemonApi {
    return new DaemonApi(config.MENU_SYNC_URL!.replace(/\/+$/, ''), config.MENU_SYNC_TOKEN);
  }

  get(path: string): Promise<unknown> {
    return this.send('GET', path);
  }

  post(path: string, body: unknown): Promise<unknown> {
    return this.send('POST', path, body);
  }

  delete(path: string): Promise<unknown> {
    return this.send('DELETE', path);
  }

  private async send(method: string, path: string, body?: unknown): Promise<unknown> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect: 'manual',
        signal: AbortSignal.timeout(30_000),
      });
    } catch (error) {
      throw new DaemonApiError(0, `no answer from ${this.baseUrl}: ${(error as Error).message}`, undefined);
    }
    const text = await response.text();
    let json: Record<string, unknown> | undefined;
    try {
      json = text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>);
    } catch {
      json = undefined;
    }
    if (!response.ok) {
      const detail = typeof json?.detail === 'string' ? json.detail : `HTTP ${response.status}`;
      throw new DaemonApiError(response.status, detail, typeof json?.field === 'string' ? json.field : undefined);
    }
    return json;
  }
}
