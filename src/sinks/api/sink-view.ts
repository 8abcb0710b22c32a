import { encodeChangeCursor } from '../../changes/change-cursor.js';
import type { LagCount, Sink } from '../sink.js';

/** A sink as the API shows it: never a secret. */
export interface SinkView {
  id: string;
  kind: Sink['kind'];
  /** postgres, mysql: with the password masked (`postgres://user:***@host/db`). */
  url?: string;
  schema?: string;
  table_prefix?: string;
  layout?: Sink['layout'];
  stream?: string;
  subject_prefix?: string;
  types: readonly string[];
  owner_ids: string[] | null;
  batch_size: number;
  timeout_ms: number;
  cursor: string;
  state: Sink['state'];
  lag: number;
  /** The count of `lag` stopped at its bound: the sink is at least `lag` changes behind. */
  lag_capped: boolean;
  attempts: number;
  last_success_at: string | null;
  last_error: string | null;
  next_attempt_at: string | null;
  failing_since: string | null;
  previous_secret_expires_at?: string | null;
  created_at: string;
  updated_at: string;
}

const iso = (date: Date | null) => (date === null ? null : date.toISOString());

function kindFields(sink: Sink): Partial<SinkView> {
  switch (sink.kind) {
    case 'http':
      return {
        url: sink.url!,
        previous_secret_expires_at: sink.previousSecret === null ? null : iso(sink.previousSecretExpiresAt),
      };
    case 'nats':
      return { stream: sink.stream!, subject_prefix: sink.subjectPrefix! };
    case 'postgres':
      return { url: sink.url!, schema: sink.schema!, layout: sink.layout! };
    case 'mysql':
      return { url: sink.url!, table_prefix: sink.tablePrefix!, layout: sink.layout! };
  }
}

export function toSinkView(sink: Sink, lag: LagCount, defaultTypes: readonly string[]): SinkView {
  return {
    id: sink.id,
    kind: sink.kind,
    ...kindFields(sink),
    types: sink.types ?? defaultTypes,
    owner_ids: sink.ownerIds,
    batch_size: sink.batchSize,
    timeout_ms: sink.timeoutMs,
    cursor: encodeChangeCursor(sink.cursor),
    state: sink.state,
    lag: lag.lag,
    lag_capped: lag.capped,
    attempts: sink.attempts,
    last_success_at: iso(sink.lastSuccessAt),
    last_error: sink.lastError,
    next_attempt_at: iso(sink.nextAttemptAt),
    failing_since: iso(sink.failingSince),
    created_at: sink.createdAt.toISOString(),
    updated_at: sink.updatedAt.toISOString(),
  };
}
