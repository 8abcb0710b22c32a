import { createHash } from 'node:crypto';
import type { ChangePosition, ChangeText } from '../changes/change.js';

/**
 * What the target answered, for the attempt's record (docs/reference.md §12): `status` the HTTP or
 * JetStream code, a database's error code or `committed`, or absent (0) for no answer; `response`
 * the first KiB of the answer, secrets redacted.
 */
export interface TargetAnswer {
  status?: number | string;
  response?: string;
}

/** What one delivery attempt came to. */
export type DeliveryOutcome = TargetAnswer &
  ({ kind: 'ok' } | { kind: 'retry'; error: string; retryAfterMs?: number } | { kind: 'gone'; error: string });

/**
 * The `webhook-id` of a batch: the same for every retry of it, across restarts, since it depends
 * only on the sink, its replay epoch and the range the batch covers (persisted as the batch in flight).
 */
export function batchWebhookId(sinkId: string, epoch: number, after: ChangePosition, last: ChangePosition): string {
  const range = `${sinkId}:${epoch}:${after.transactionId}.${after.seq}:${last.transactionId}.${last.seq}`;
  return `msg_${createHash('sha256').update(range).digest('base64url').slice(0, 32)}`;
}

/**
 * The changes of a batch worth sending, in seq order: a change superseded by a newer one of the
 * same resource in the same batch is left out (changes carry full state, docs/reference.md §11).
 */
export function newestPerResource<T extends { type: string; id: string }>(changes: readonly T[]): T[] {
  const last = new Map<string, number>();
  changes.forEach((change, index) => last.set(`${change.type}\u0000${change.id}`, index));
  return changes.filter((change, index) => last.get(`${change.type}\u0000${change.id}`) === index);
}

/** An HTTP sink's body, `{"data":[change…]}`, joined from the changes' texts without parsing them. */
export function batchBody(changes: readonly ChangeText[]): string {
  return `{"data":[${newestPerResource(changes)
    .map((change) => change.json)
    .join(',')}]}`;
}
