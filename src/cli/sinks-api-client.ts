import type { AppConfig } from '../config/app-config.js';
import type { SinkView } from '../sinks/api/sink-view.js';
import { DaemonApi, DaemonApiError } from './daemon-api.js';
import { exitCodeOf, SinkAnswer, SinkClient, SinkCommandError } from './sinks-client.js';

/** The sinks of the daemon at MENU_SYNC_URL, through /api/v1/sinks. */
export class ApiSinkClient implements SinkClient {
  constructor(private readonly api: DaemonApi) {}

  static fromConfig(config: AppConfig): ApiSinkClient {
    return new ApiSinkClient(DaemonApi.fromConfig(config));
  }

  create(body: Record<string, unknown>): Promise<SinkAnswer> {
    return this.call(() => this.api.post('/api/v1/sinks', body)) as Promise<SinkAnswer>;
  }

  async all(): Promise<SinkView[]> {
    const data: SinkView[] = [];
    let after: string | null = null;
    do {
      const query: string = `?limit=1000&order=created${after === null ? '' : `&after=${encodeURIComponent(after)}`}`;
      const page = (await this.call(() => this.api.get(`/api/v1/sinks${query}`))) as {
        data: SinkView[];
        next_cursor: string | null;
      };
      data.push(...page.data);
      after = page.next_cursor;
    } while (after !== null);
    return data;
  }

  async startingWith(prefix: string): Promise<SinkView[]> {
    const page = (await this.call(() => this.api.get(`/api/v1/sinks?limit=1000&q=${encodeURIComponent(prefix)}`))) as {
      data: SinkView[];
    };
    return page.data;
  }

  get(id: string): Promise<SinkAnswer> {
    return this.call(() => this.api.get(`/api/v1/sinks/${id}`)) as Promise<SinkAnswer>;
  }

  replay(id: string, from: string): Promise<SinkAnswer> {
    return this.call(() => this.api.post(`/api/v1/sinks/${id}/replay`, { from })) as Promise<SinkAnswer>;
  }

  async remove(id: string): Promise<void> {
    await this.call(() => this.api.delete(`/api/v1/sinks/${id}`));
  }

  private async call(request: () => Promise<unknown>): Promise<unknown> {
    try {
      return await request();
    } catch (error) {
      if (!(error instanceof DaemonApiError)) throw error;
      const field = error.field === undefined ? '' : ` (${error.field})`;
      throw new SinkCommandError(`${error.detail}${field}`, exitCodeOf(error.status));
    }
  }
}
