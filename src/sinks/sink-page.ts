import { BadRequestError } from '../common/app-error.js';
import type { SinkKind, SinkState } from './sink.js';

/** `created`: oldest first (the default); `failing`: failing, retrying, disabled, then active, oldest failure first. */
export const SINK_ORDERS = ['created', 'failing'] as const;
export type SinkOrder = (typeof SINK_ORDERS)[number];

/** Where a page of `GET /api/v1/sinks` ends, in the page's order; the next page starts after it. */
export type SinkPageKey =
  | { order: 'created'; createdAt: string; id: string }
  | { order: 'failing'; rank: number; failingSince: string; createdAt: string; id: string };

export interface SinkPageQuery {
  limit: number;
  order: SinkOrder;
  after?: SinkPageKey;
  state?: SinkState;
  kind?: SinkKind;
  /** Sinks whose `owner_ids` name this owner. */
  ownerId?: string;
  /** Sinks whose id starts with it, or whose `owner_ids` name it. */
  q?: string;
}

/** How far `order=failing` puts a state: what needs attention first. */
export const STATE_RANK: Record<SinkState, number> = { failing: 0, retrying: 1, disabled: 2, active: 3 };

const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const AFTER_MESSAGE = 'after must be the next_cursor of the previous page, in the same order';

/** Opaque, URL-safe: base64url of the key's fields joined by spaces, the order first. */
export function encodeSinkPageKey(key: SinkPageKey): string {
  const fields =
    key.order === 'created'
      ? ['c', key.createdAt, key.id]
      : ['f', String(key.rank), key.failingSince, key.createdAt, key.id];
  return Buffer.from(fields.join(' '), 'utf8').toString('base64url');
}

/** The key of a `next_cursor` given out for `order`; anything else is a 400 naming `after`. */
export function decodeSinkPageKey(cursor: string, order: SinkOrder): SinkPageKey {
  const fields = /^[A-Za-z0-9_-]{1,200}$/.test(cursor)
    ? Buffer.from(cursor, 'base64url').toString('utf8').split(' ')
    : [];
  if (order === 'created' && fields.length === 3 && fields[0] === 'c') {
    const [, createdAt, id] = fields;
    if (INSTANT.test(createdAt) && UUID.test(id)) return { order, createdAt, id };
  }
  if (order === 'failing' && fields.length === 5 && fields[0] === 'f') {
    const [, rank, failingSince, createdAt, id] = fields;
    if (
      /^[0-3]$/.test(rank) &&
      (failingSince === 'infinity' || INSTANT.test(failingSince)) &&
      INSTANT.test(createdAt) &&
      UUID.test(id)
    )
      return { order, rank: Number(rank), failingSince, createdAt, id };
  }
  throw new BadRequestError(AFTER_MESSAGE, 'after');
}
