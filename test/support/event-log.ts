import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { WebhookEvent } from '../../src/domain/webhook-event.js';
import type { NewLogEntry } from '../../src/event-log/log-entry.js';
import { toWebhookEvent } from '../../src/projection/from-log-entry.js';

export interface LoggedEvent {
  eventId: string;
  eventType: string;
  subjectId: string;
  /** Default: the resource type of the event type. */
  subjectType?: string;
  /** Default: 42. */
  ownerId?: string;
  occurredAt: string;
  seq: number | null;
  /** The resources the delivery includes (none by default). */
  included?: unknown[];
  /** The body as delivered; by default the spec's webhook_event with `included`. */
  payload?: string;
}

/** A log entry as ingress appends a verified webhook delivery of `event`. */
export function newLogEntry(event: LoggedEvent): NewLogEntry {
  const subjectType = event.subjectType ?? event.eventType.split('.')[0];
  const payload =
    event.payload ??
    JSON.stringify({
      data: {
        id: event.eventId,
        type: 'webhook_event',
        attributes: { id: event.seq, created_at: event.occurredAt, event_type: event.eventType },
        relationships: { subject: { data: { id: event.subjectId, type: subjectType } } },
      },
      included: event.included ?? [],
    });
  return {
    eventId: event.eventId,
    eventType: event.eventType,
    subjectType,
    subjectId: event.subjectId,
    ownerId: event.ownerId ?? '42',
    occurredAt: event.occurredAt,
    eventSeq: event.seq === null ? null : String(event.seq),
    source: 'webhook',
    handled: true,
    receivedAt: new Date(),
    keyId: 'env:1',
    contentType: 'application/json',
    payload,
    rawBody: null,
    rawSealed: false,
    rawKey: null,
    rawKeyAt: null,
    sha256: createHash('sha256').update(payload).digest(),
  };
}

/**
 * Every event in the log, as the projection code types them (entries outside the spec left out);
 * with `upTo`, only the entries a projector at that checkpoint has read ((transaction id, position) ≤ it).
 */
export async function readLog(
  client: pg.Client,
  upTo?: { transactionId: string; position: string },
): Promise<{ events: WebhookEvent[]; entries: number }> {
  const { rows } = await client.query(
    `SELECT position::text AS position, event_id, event_type, subject_type, subject_id, owner_id, occurred_at,
            event_seq::text AS event_seq, payload::text AS payload
       FROM event_log ${upTo === undefined ? '' : 'WHERE (transaction_id, position) <= ($1::xid8, $2::bigint)'}
      ORDER BY position`,
    upTo === undefined ? [] : [upTo.transactionId, upTo.position],
  );
  const events: WebhookEvent[] = [];
  for (const row of rows) {
    const event = toWebhookEvent({
      eventId: row.event_id,
      eventType: row.event_type,
      subjectType: row.subject_type,
      subjectId: row.subject_id,
      ownerId: row.owner_id,
      occurredAt: row.occurred_at,
      eventSeq: row.event_seq,
      position: Number(row.position),
      payload: row.payload,
    });
    if (event !== null) events.push(event);
  }
  return { events, entries: rows.length };
}
