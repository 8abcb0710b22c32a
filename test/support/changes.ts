import { api, API_TOKEN } from './http.js';

export type Change = any;

/** Every change after `after` (the start when undefined) that the feed has now, and the cursor after them. */
export async function changesAfter(
  baseUrl: string,
  after?: string,
  query = '',
): Promise<{ changes: Change[]; cursor: string }> {
  const changes: Change[] = [];
  let cursor = after;
  for (;;) {
    const page = await api(
      baseUrl,
      `/api/v1/changes?limit=1000${cursor === undefined ? '' : `&after=${cursor}`}${query}`,
    );
    if (page.status !== 200) throw new Error(`GET /api/v1/changes: ${page.status} ${page.text}`);
    changes.push(...page.json.data);
    cursor = page.json.next_cursor as string;
    if (page.json.data.length < 1000) return { changes, cursor };
  }
}

export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

/**
 * A Server-Sent Events client reading `GET /api/v1/changes` with `Accept: text/event-stream`
 * (test-side parsing of the stream, so the daemon's framing is what is checked).
 */
export class ChangeStream {
  readonly events: SseEvent[] = [];
  comments = 0;
  private readonly abort = new AbortController();
  readonly done: Promise<void>;
  status = 0;

  constructor(baseUrl: string, options: { after?: string; lastEventId?: string; query?: string; token?: string } = {}) {
    const headers: Record<string, string> = {
      accept: 'text/event-stream',
      authorization: `Bearer ${options.token ?? API_TOKEN}`,
    };
    if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
    const url = `${baseUrl}/api/v1/changes?${options.after === undefined ? '' : `after=${options.after}`}${options.query ?? ''}`;
    this.done = (async () => {
      try {
        const response = await fetch(url, { headers, signal: this.abort.signal });
        this.status = response.status;
        const decoder = new TextDecoder();
        let buffer = '';
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            this.parse(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        }
      } catch {
        // Closed by close() or by the daemon going away.
      }
    })();
  }

  get changes(): Change[] {
    return this.events.filter((event) => event.event === 'change').map((event) => JSON.parse(event.data));
  }

  get lastId(): string | undefined {
    return this.events.filter((event) => event.id !== undefined).at(-1)?.id;
  }

  close(): Promise<void> {
    this.abort.abort();
    return this.done;
  }

  private parse(block: string): void {
    const event: SseEvent = { data: '' };
    let fields = 0;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) {
        this.comments++;
        continue;
      }
      const colon = line.indexOf(':');
      const [name, value] = colon < 0 ? [line, ''] : [line.slice(0, colon), line.slice(colon + 1).replace(/^ /, '')];
      fields++;
      if (name === 'id') event.id = value;
      else if (name === 'event') event.event = value;
      else if (name === 'data') event.data += (event.data ? '\n' : '') + value;
    }
    if (fields > 0 && event.event !== undefined) this.events.push(event);
  }
}
