import { createHash } from 'node:crypto';
import type { SpecEventName } from '../domain/event-names.js';
import type { NewLogEntry } from '../event-log/log-entry.js';
import { parseDelivery } from '../ingress/webhook-event.parser.js';
import type { SnapshotResource } from './snapshot-diff.js';

/** Longer subject ids are hashed into the event id, which must stay within the log's 255 characters. */
const MAX_ID_PART = 64;

export interface ReconcileChange {
  eventType: SpecEventName;
  subject: { type: string; id: string };
  ownerId: string;
  /** The resource and what its event includes (empty for `*.destroyed`). */
  included: SnapshotResource[];
}

/**
 * A difference found by reconcile, as a log entry with source `reconcile`: a spec-shaped webhook
 * event whose version is the fetch time with `attributes.id` 0, so any webhook created after the
 * fetch — even in the same millisecond — still wins (docs/reference.md §4, §8). It goes through the same
 * parser as deliveries, so the log holds one shape whatever the source. Throws its
 * DeliveryRejection when the resource cannot be logged at all (an id of over 255 characters …).
 */
export function reconcileEntry(change: ReconcileChange, runId: string, fetchedAt: Date): NewLogEntry {
  const eventId = `reconcile:${runId}:${change.subject.type}:${eventIdPart(change.subject.id)}`;
  const body = {
    data: {
      id: eventId,
      type: 'webhook_event',
      attributes: { id: 0, created_at: fetchedAt.toISOString(), event_type: change.eventType, uri: null },
      relationships: {
        subject: { data: change.subject },
        resource_owner: { data: { id: change.ownerId, type: 'user' } },
      },
    },
    included: change.included.map(({ related: _related, ...resource }) => resource),
  };
  const {
    keyAt: _keyAt,
    sealWhole: _sealWhole,
    ...parsed
  } = parseDelivery(Buffer.from(JSON.stringify(body), 'utf8'), 'application/json');
  return {
    ...parsed,
    source: 'reconcile',
    receivedAt: new Date(),
    keyId: null,
    contentType: 'application/json',
    rawSealed: false,
    rawKey: null,
    rawKeyAt: null,
  };
}

/**
 * The subject id as it appears in a reconcile event id: as is when short and storable, else the
 * first 32 hex digits of its SHA-256 (the subject itself stays in `data.relationships.subject`).
 */
export function eventIdPart(subjectId: string): string {
  if (subjectId.length <= MAX_ID_PART && !subjectId.includes('\u0000') && subjectId.isWellFormed()) return subjectId;
  return `sha256-${createHash('sha256').update(subjectId, 'utf8').digest('hex').slice(0, 32)}`;
}
