import { Agent, request } from 'node:http';
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { fold, ResourceState } from '../../src/domain/evolve.js';
import { readLog } from '../support/event-log.js';
import { api } from '../support/http.js';
import type { Json } from '../support/menu-events.js';

/**
 * Bounded webhook load for the fault tests (test/faults/): senders posting distinct events, every
 * answer recorded with its time, and a resend of whatever was not acknowledged — what the platform
 * does after a 503 or a dropped connection.
 */

export interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: string;
}

/** One delivery attempt; status 0 = no answer (connection refused or reset). */
export interface Attempt {
  eventId: string;
  target: string;
  status: number;
  retryAfter: string | undefined;
  sentAt: number;
  answeredAt: number;
  error?: string;
}

export interface Delivery {
  eventId: string;
  body: string;
}

const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** One POST; rejects on a connection error or after 15 s without an answer. */
export function post(url: string, body: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        timeout: 15_000,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            retryAfter: res.headers['retry-after'] as string | undefined,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer within 15 s')));
    req.on('error', reject);
    req.end(body);
  });
}

/** Closes the keep-alive sockets (jest must not find them open). */
export function closeAgent(): void {
  agent.destroy();
}

export const isAcked = (status: number) => status >= 200 && status < 300;

export interface LoadOptions {
  /** Base URLs delivered to in turn (a sender's n-th delivery goes to targets()[n % length]). */
  targets: () => string[];
  key: string;
  senders: number;
  /** New events in all; each is sent once by the load (resend() sends what was not acknowledged). */
  events: number;
  /** Pause of each sender between its deliveries. */
  pauseMs: number;
  make: (n: number) => Json;
}

export class Load {
  readonly attempts: Attempt[] = [];
  readonly deliveries: Delivery[] = [];
  private readonly acked = new Set<string>();
  private stopped = false;
  private next = 0;
  readonly done: Promise<void>;

  constructor(private readonly options: LoadOptions) {
    this.done = Promise.all(Array.from({ length: options.senders }, (_, i) => this.sender(i))).then(() => undefined);
  }

  stop(): void {
    this.stopped = true;
  }

  get ackedCount(): number {
    return this.acked.size;
  }

  /** Answers to attempts sent at or after `from` (and before `to`, when given). */
  answersBetween(from: number, to = Infinity): Attempt[] {
    return this.attempts.filter((attempt) => attempt.sentAt >= from && attempt.sentAt < to);
  }

  /** Sends every delivery not yet answered 2XX again to `target`, until each is (bounded), in parallel batches. */
  async resend(target: string, maxRounds = 20): Promise<void> {
    for (let round = 0; round < maxRounds; round++) {
      const open = this.deliveries.filter((delivery) => !this.acked.has(delivery.eventId));
      if (open.length === 0) return;
      for (let i = 0; i < open.length; i += 16)
        await Promise.all(open.slice(i, i + 16).map((delivery) => this.attempt(target, delivery)));
      if (open.some((delivery) => !this.acked.has(delivery.eventId)))
        await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const left = this.deliveries.filter((delivery) => !this.acked.has(delivery.eventId)).length;
    if (left > 0) throw new Error(`${left} deliveries still not acknowledged after ${maxRounds} resend rounds`);
  }

  private async sender(index: number): Promise<void> {
    for (let n = 0; !this.stopped && this.next < this.options.events; n++) {
      const k = this.next++;
      const body = JSON.stringify(this.options.make(k));
      const delivery = { eventId: (JSON.parse(body) as Json).data.id as string, body };
      this.deliveries.push(delivery);
      const targets = this.options.targets();
      await this.attempt(targets[(index + n) % targets.length], delivery);
      await new Promise((resolve) => setTimeout(resolve, this.options.pauseMs));
    }
  }

  private async attempt(target: string, delivery: Delivery): Promise<void> {
    const sentAt = Date.now();
    try {
      const answer = await post(`${target}/webhooks/${this.options.key}`, delivery.body);
      this.attempts.push({
        eventId: delivery.eventId,
        target,
        status: answer.status,
        retryAfter: answer.retryAfter,
        sentAt,
        answeredAt: Date.now(),
      });
      if (isAcked(answer.status)) this.acked.add(delivery.eventId);
    } catch (error) {
      this.attempts.push({
        eventId: delivery.eventId,
        target,
        status: 0,
        retryAfter: undefined,
        sentAt,
        answeredAt: Date.now(),
        error: (error as Error).message,
      });
    }
  }
}

/** Count of attempts per status ("0" = no answer). */
export function statusCounts(attempts: Attempt[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const attempt of attempts) counts[attempt.status] = (counts[attempt.status] ?? 0) + 1;
  return counts;
}

/** Every given event id in event_log, and how many times (the unique index makes > 1 impossible; checked anyway). */
export async function logCounts(client: pg.Client, eventIds: string[]): Promise<Map<string, number>> {
  const { rows } = await client.query<{ event_id: string; n: number }>(
    `SELECT event_id, count(*)::int AS n FROM event_log WHERE event_id = ANY($1::text[]) GROUP BY event_id`,
    [eventIds],
  );
  return new Map(rows.map((row) => [row.event_id, row.n]));
}

/** Both projections at the head of the log, by GET /api/v1/projections. */
export async function projections(
  url: string,
  token: string,
): Promise<Array<{ name: string; position: number; head: number; lag: number; state: string }>> {
  const answer = await api(url, '/api/v1/projections', token);
  if (answer.status !== 200) throw new Error(`GET /api/v1/projections answered ${answer.status}`);
  return answer.json.data;
}

interface Shown {
  owner_id: string | null;
  deleted: boolean;
  attributes: unknown;
  relationships: unknown;
  event_id: string;
  position: number;
}

const shownOf = (state: ResourceState): Shown => ({
  owner_id: state.ownerId,
  deleted: state.deleted,
  attributes: state.attributes,
  relationships: state.relationships,
  event_id: state.version.eventId,
  position: state.position,
});

/**
 * What GET /api/v1/{list}?include_deleted=true shows, next to the fold (src/projection/evolve.ts)
 * of every event in the log, for the given menu types: the differences, empty when equal.
 */
export async function apiVersusFold(
  url: string,
  token: string,
  client: pg.Client,
  lists: Record<string, string>,
): Promise<{ problems: string[]; resources: number }> {
  const { events } = await readLog(client);
  const expected = new Map<string, Shown>();
  for (const state of fold(events).values())
    if (state.type in lists) expected.set(`${state.type} ${state.id}`, shownOf(state));
  const actual = new Map<string, Shown>();
  for (const [type, list] of Object.entries(lists)) {
    let cursor: string | null = null;
    do {
      const page = await api(
        url,
        `/api/v1/${list}?include_deleted=true&limit=1000${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
        token,
      );
      if (page.status !== 200) throw new Error(`GET /api/v1/${list} answered ${page.status}: ${page.text}`);
      for (const resource of page.json.data) {
        actual.set(`${type} ${resource.id}`, {
          owner_id: resource.owner_id,
          deleted: resource.deleted,
          attributes: resource.attributes,
          relationships: resource.relationships,
          event_id: resource.version.event_id,
          position: resource.version.position,
        });
      }
      cursor = page.json.next_cursor;
    } while (cursor !== null);
  }
  const problems: string[] = [];
  for (const [key, want] of expected) {
    const got = actual.get(key);
    if (!got) problems.push(`${key}: not in the API`);
    else if (!isDeepStrictEqual(got, want))
      problems.push(`${key}: API ${JSON.stringify(got)}\n  fold ${JSON.stringify(want)}`);
  }
  for (const key of actual.keys()) if (!expected.has(key)) problems.push(`${key}: in the API, not in the fold`);
  return { problems, resources: expected.size };
}
