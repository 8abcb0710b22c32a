import type { SecretCipher } from '../common/secret-cipher.js';
import type { Sink, SinkKind, SinkState, TableLayout } from './sink.js';

// A row of `sinks` as PostgreSQL answers it, and the Sink it is: shared by the repository that
// writes sinks and the one that lists them. Secrets are sealed at rest: SinkRepository seals them,
// sinkOfRow opens them.

export interface SinkRow {
  id: string;
  kind: SinkKind;
  url: string | null;
  url_sealed: Buffer | null;
  schema: string | null;
  table_prefix: string | null;
  layout: TableLayout | null;
  stream: string | null;
  subject_prefix: string | null;
  types: string[] | null;
  owner_ids: string[] | null;
  batch_size: number;
  timeout_ms: number;
  cursor_xid: string;
  cursor_seq: string;
  state: SinkState;
  failing_since: Date | null;
  last_success_at: Date | null;
  last_error: string | null;
  next_attempt_at: Date | null;
  attempts: number;
  epoch: number;
  inflight_xid: string | null;
  inflight_seq: string | null;
  snapshot_xid: string | null;
  snapshot_seq: string | null;
  secret: Buffer | null;
  previous_secret: Buffer | null;
  previous_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export const XIDS = `cursor_xid::text AS cursor_xid, inflight_xid::text AS inflight_xid, snapshot_xid::text AS snapshot_xid`;
export const SELECT = `SELECT *, ${XIDS} FROM sinks`;
export const RETURNING = `RETURNING *, ${XIDS}`;

/** The additional data a sealed column of sink `id` is bound to: a value moved to another row or column does not open. */
export const aad = (id: string, column: 'secret' | 'previous_secret' | 'url') => `sink:${id}:${column}`;

/** A sink whose secrets do not open (TOKEN_ENCRYPTION_KEY changed) has none: it cannot sign, and says so. */
export function sinkOfRow(cipher: SecretCipher, row: SinkRow): Sink {
  const open = (value: Buffer | null, column: 'secret' | 'previous_secret' | 'url') => {
    if (value === null) return null;
    try {
      return cipher.open(value, aad(row.id, column));
    } catch {
      return null;
    }
  };
  return {
    id: row.id,
    kind: row.kind,
    url: row.url,
    targetUrl: open(row.url_sealed, 'url'),
    schema: row.schema,
    tablePrefix: row.table_prefix,
    layout: row.layout,
    stream: row.stream,
    subjectPrefix: row.subject_prefix,
    types: row.types,
    ownerIds: row.owner_ids,
    batchSize: row.batch_size,
    timeoutMs: row.timeout_ms,
    cursor: { transactionId: row.cursor_xid, seq: row.cursor_seq },
    state: row.state,
    failingSince: row.failing_since,
    lastSuccessAt: row.last_success_at,
    lastError: row.last_error,
    nextAttemptAt: row.next_attempt_at,
    attempts: row.attempts,
    epoch: row.epoch,
    inflight:
      row.inflight_xid === null || row.inflight_seq === null
        ? null
        : { transactionId: row.inflight_xid, seq: row.inflight_seq },
    snapshotTo:
      row.snapshot_xid === null || row.snapshot_seq === null
        ? null
        : { transactionId: row.snapshot_xid, seq: row.snapshot_seq },
    secret: open(row.secret, 'secret'),
    previousSecret:
      row.previous_secret_expires_at !== null && row.previous_secret_expires_at > new Date()
        ? open(row.previous_secret, 'previous_secret')
        : null,
    previousSecretExpiresAt: row.previous_secret_expires_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
