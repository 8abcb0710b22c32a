export type EventSource = 'webhook' | 'reconcile' | 'import';

/**
 * An event about to be appended. `payload` is the JSON text; `rawBody` only when the bytes differ.
 * Bytes that held the webhook key are stored with it redacted, `rawKey` (the key, sealed) and
 * `rawKeyAt` (where it stood) restoring them; a key found only after decoding another charset
 * makes `rawBody` the whole body sealed (`rawSealed`). See RawBodySealer.
 */
export interface NewLogEntry {
  eventId: string;
  eventType: string;
  subjectType: string;
  subjectId: string;
  ownerId: string | null;
  occurredAt: string;
  /** `data.attributes.id`: the second part of an event's version, an integer as decimal text. */
  eventSeq: string | null;
  source: EventSource;
  handled: boolean;
  receivedAt: Date;
  keyId: string | null;
  contentType: string | null;
  payload: string;
  /** `payload` as UTF-8, when the producer holds those bytes already (saves encoding it again). */
  payloadUtf8?: Buffer;
  rawBody: Buffer | null;
  rawSealed: boolean;
  rawKey: Buffer | null;
  /** Byte offsets, in the stored bytes, of the `[redacted]` that stand for the key. */
  rawKeyAt: number[] | null;
  /** Of the exact bytes received. */
  sha256: Buffer;
}

export interface AppendResult {
  eventId: string;
  position: number;
  /** false when an event with this id was already in the log (or earlier in the same batch). */
  inserted: boolean;
}

export interface LogEntrySummary {
  position: number;
  eventId: string;
  eventType: string;
  subjectType: string;
  subjectId: string;
  ownerId: string | null;
  occurredAt: Date;
  receivedAt: Date;
  source: EventSource;
  handled: boolean;
}

export interface LogEntry extends LogEntrySummary {
  eventSeq: string | null;
  keyId: string | null;
  contentType: string | null;
  payload: string;
  sha256: Buffer;
  /** The bytes as stored: sealed when `rawSealed`, the key redacted at `rawKeyAt` (RawBodySealer restores both). */
  raw: Buffer;
  rawSealed: boolean;
  rawKey: Buffer | null;
  rawKeyAt: number[] | null;
  transactionId: string;
}

/**
 * Where a gap-safe reader stands: the last entry it has read, in (transaction id, position) order.
 * Both are bigint values kept as decimal text.
 */
export interface LogCheckpoint {
  transactionId: string;
  position: string;
}

export const LOG_START: LogCheckpoint = { transactionId: '0', position: '0' };

export interface LogPage {
  entries: LogEntry[];
  checkpoint: LogCheckpoint;
}

export interface LogFilter {
  after: number;
  /** Newest first, below this position (paging back from the head). */
  before?: number;
  limit: number;
  eventType?: string;
  subjectType?: string;
  subjectId?: string;
  /** A token's owner scope: only entries of these owners. */
  ownerIds?: readonly string[];
}
