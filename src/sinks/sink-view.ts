import { encodeChangeCursor } from '../changes/change-cursor.js';
import type { Sink } from './sink.js';

/** A sink as the API shows it: never a secret. */
export interface SinkView {
  id: string;
  kind: Sink['kind'];
  url?: string;
  stream?: string;
  subject_prefix?: string;
  types: readonly string[];
  owner_ids: string[] | null;
  batch_size: number;
  timeout_ms: number;
  cursor: string;
  state: Sink['state'];
  lag: number;
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

export function toSinkView(sink: Sink, lag: number, defaultTypes: readonly string[]): SinkView {
  return {
    id: sink.id,
    kind: sink.kind,
    ...(sink.kind === 'http'
      ? {
          url: sink.url!,
          previous_secret_expires_at: sink.previousSecret === null ? null : iso(sink.previousSecretExpiresAt),
        }
      : { stream: sink.stream!, subject_prefix: sink.subjectPrefix! }),
    types: sink.types ?? defaultTypes,
    owner_ids: sink.ownerIds,
    batch_size: sink.batchSize,
    timeout_ms: sink.timeoutMs,
    cursor: encodeChangeCursor(sink.cursor),
    state: sink.state,
    lag,
    attempts: sink.attempts,
    last_success_at: iso(sink.lastSuccessAt),
    last_error: sink.lastError,
    next_attempt_at: iso(sink.nextAttemptAt),
    failing_since: iso(sink.failingSince),
    created_at: sink.createdAt.toISOString(),
    updated_at: sink.updatedAt.toISOString(),
  };
}
