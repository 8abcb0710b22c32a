import { isSpecEventName } from '../domain/event-names.js';
import type { LogEntry } from '../event-log/log-entry.js';
import type { ResourceObject, WebhookEvent } from '../domain/webhook-event.js';

/** The typed event of a log entry, or null for an event type outside the spec. */
export function toWebhookEvent(
  entry: Pick<
    LogEntry,
    | 'eventId'
    | 'eventType'
    | 'subjectType'
    | 'subjectId'
    | 'ownerId'
    | 'occurredAt'
    | 'eventSeq'
    | 'position'
    | 'payload'
  >,
): WebhookEvent | null {
  if (!isSpecEventName(entry.eventType)) return null;
  const document = JSON.parse(entry.payload) as { included?: unknown };
  const included = Array.isArray(document.included)
    ? document.included.filter(
        (resource): resource is ResourceObject =>
          typeof resource === 'object' && resource !== null && typeof (resource as ResourceObject).type === 'string',
      )
    : [];
  return {
    eventType: entry.eventType,
    eventId: entry.eventId,
    seq: entry.eventSeq === null ? null : BigInt(entry.eventSeq),
    occurredAt: entry.occurredAt,
    position: entry.position,
    ownerId: entry.ownerId,
    subject: { type: entry.subjectType, id: entry.subjectId },
    included,
  } as WebhookEvent;
}
