import { Inject, Injectable, Logger } from '@nestjs/common';
import { MetricsService } from '../observability/metrics.service.js';
import { callWithRetries } from './call-with-retries.js';
import { RateBudget } from './rate-budget.js';
import { TokenRefresher } from './token-refresher.js';
import type { AccessGrant } from './token-refresher.js';
import { UPSTREAM_SETTINGS } from './upstream-settings.js';
import type { UpstreamSettings } from './upstream-settings.js';
import { UPSTREAM_TIMINGS } from './upstream-timings.js';
import type { UpstreamTimings } from './upstream-timings.js';

/** A call to `{base_url}` on behalf of a connection. */
export interface UpstreamRequest {
  method: 'GET' | 'POST';
  /** From `{base_url}`, starting with `/`. */
  path: string;
  query?: Record<string, string>;
  /** Sent as `application/x-www-form-urlencoded`. */
  form?: URLSearchParams;
  /** Selects the API version with `Accept: <UPSTREAM_MEDIA_TYPE>` (spec endpoint 4). */
  versioned?: boolean;
  /** The caller's deadline: the call stops when it fires, with its reason. */
  signal?: AbortSignal;
}

export interface UpstreamResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed, or undefined when it is not JSON. */
  json: unknown;
}

const DEFAULT_MEDIA_TYPE = 'application/vnd.service.v2';

/**
 * The one place that calls `{base_url}` (docs/reference.md §7): the bearer token of the connection,
 * refreshed before it is due and once after a 401; every attempt within the connection's rate
 * budget (UPSTREAM_RATE_LIMIT), which a 429 pauses for every caller of the connection; 429, 5XX
 * and network faults retried with bounded attempts, full-jitter backoff and `Retry-After`; every
 * answer counted by status. A
 * fault that may have reached the server is retried for GET only: a POST is not known to be safe
 * to repeat. Other 4XX answers are the caller's to read.
 */
@Injectable()
export class UpstreamClient {
  private readonly logger = new Logger(UpstreamClient.name);

  constructor(
    private readonly tokens: TokenRefresher,
    private readonly budget: RateBudget,
    private readonly metrics: MetricsService,
    @Inject(UPSTREAM_SETTINGS) private readonly settings: UpstreamSettings | null,
    @Inject(UPSTREAM_TIMINGS) private readonly timings: UpstreamTimings,
  ) {}

  /** Throws ReauthorizationRequiredError (no call made) or UpstreamUnavailableError (retries exhausted). */
  async request(connectionId: number, request: UpstreamRequest): Promise<UpstreamResponse> {
    const grant = await this.tokens.accessToken(connectionId);
    const answer = await this.send(connectionId, grant, request);
    if (answer.status !== 401) return answer;
    return this.send(connectionId, await this.tokens.refreshAfterRejection(connectionId, grant.version), request);
  }

  private send(connectionId: number, grant: AccessGrant, request: UpstreamRequest): Promise<UpstreamResponse> {
    const url = new URL(`${grant.baseUrl}${request.path}`);
    for (const [name, value] of Object.entries(request.query ?? {})) url.searchParams.set(name, value);
    const init: RequestInit = {
      method: request.method,
      headers: this.headersOf(grant, request),
      body: request.form?.toString(),
      redirect: 'manual',
    };
    return callWithRetries(
      this.timings,
      {
        label: `${request.method} ${request.path}`,
        repeatable: request.method === 'GET',
        budget: this.budget.for(connectionId),
        signal: request.signal,
        observe: (status) => this.metrics.upstreamRequests.inc({ status: String(status) }),
        send: async (signal) => read(await fetch(url, { ...init, signal })),
      },
      this.logger,
    );
  }

  private headersOf(grant: AccessGrant, request: UpstreamRequest): Headers {
    const headers = new Headers({ authorization: `Bearer ${grant.token}` });
    if (request.versioned) headers.set('accept', this.settings?.mediaType ?? DEFAULT_MEDIA_TYPE);
    if (request.form !== undefined) headers.set('content-type', 'application/x-www-form-urlencoded');
    return headers;
  }
}

/** The whole answer, read within the attempt's timeout. */
async function read(response: Response): Promise<UpstreamResponse> {
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    json: parseJson(text, response.headers.get('content-type')),
  };
}

function parseJson(text: string, contentType: string | null): unknown {
  if (text === '' || (contentType !== null && !/json/i.test(contentType))) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
