import type { ChangeEntry, ChangePosition, ChangeText } from '../../changes/change.js';
import type { SinkAttemptsService } from '../attempts/sink-attempts.service.js';
import { batchBody, batchWebhookId, DeliveryOutcome } from '../delivery.js';
import { HttpSinkClient } from '../http/http-sink.client.js';
import { NatsSinkClient } from '../nats/nats-sink.client.js';
import type { Sink } from '../sink.js';
import { TableSinksClient } from '../tables/table-sinks.client.js';
import { isTableKind } from '../tables/table-target.js';
import { seqOf, SinkChange } from './sink-pages.js';

/** The sink may be known since before its previous secret expired. */
const previousSecretValid = (sink: Sink) =>
  sink.previousSecret !== null && (sink.previousSecretExpiresAt?.getTime() ?? 0) > Date.now();

/** The three kinds of target a batch goes to. */
export interface SinkTargets {
  http: HttpSinkClient;
  nats: NatsSinkClient;
  tables: TableSinksClient;
  defaultTypes: readonly string[];
}

/** Sends a batch to its sink's target: a table sink takes changes as objects, any other sink their texts. */
export function sendBatch(
  targets: SinkTargets,
  sink: Sink,
  batch: SinkChange[],
  last: ChangePosition,
  signal: AbortSignal,
): Promise<DeliveryOutcome> {
  if (isTableKind(sink.kind))
    return targets.tables.apply(sink, sink.types ?? targets.defaultTypes, batch as ChangeEntry[]);
  const changes = batch as ChangeText[];
  if (sink.kind === 'nats') {
    return targets.nats.publish({
      stream: sink.stream!,
      subjectPrefix: sink.subjectPrefix!,
      changes,
      timeoutMs: sink.timeoutMs,
    });
  }
  if (sink.secret === null) {
    return Promise.resolve({
      kind: 'retry',
      error: 'the sink secret cannot be opened with the current TOKEN_ENCRYPTION_KEY; rotate it',
    });
  }
  return targets.http.send({
    sinkId: sink.id,
    url: sink.url!,
    webhookId: batchWebhookId(sink.id, sink.epoch, sink.cursor, last),
    body: batchBody(changes),
    secrets: previousSecretValid(sink) ? [sink.secret, sink.previousSecret!] : [sink.secret],
    timeoutMs: sink.timeoutMs,
    signal,
  });
}

/** The attempt to keep of what was sent and what the target answered (docs/reference.md §12). */
export function attemptOf(
  sink: Sink,
  batch: SinkChange[],
  outcome: DeliveryOutcome,
  seconds: number,
): Parameters<SinkAttemptsService['record']>[0] {
  const last = batch.at(-1);
  return {
    sinkId: sink.id,
    at: new Date(Date.now() - seconds * 1000),
    firstSeq: batch.length === 0 ? null : seqOf(batch[0]),
    lastSeq: last === undefined ? null : seqOf(last),
    changes: batch.length,
    webhookId:
      sink.kind === 'http' && last !== undefined
        ? batchWebhookId(sink.id, sink.epoch, sink.cursor, last.position)
        : null,
    outcome: outcome.kind === 'gone' ? 'disabled' : outcome.kind,
    status: outcome.status ?? 0,
    durationMs: seconds * 1000,
    error: outcome.kind === 'ok' ? null : outcome.error,
    response: outcome.response ?? null,
  };
}

/** The sink as a cursor move to `last` leaves it (what SinkRepository's success writes). */
export const acknowledged = (sink: Sink, last: ChangePosition): Sink => ({
  ...sink,
  cursor: last,
  inflight: null,
  attempts: 0,
  nextAttemptAt: null,
  failingSince: null,
  lastError: null,
  state: sink.state === 'disabled' ? 'disabled' : 'active',
  lastSuccessAt: new Date(),
});
