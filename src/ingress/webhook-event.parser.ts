import { hash } from 'node:crypto';
import { TextDecoder } from 'node:util';
import { isSpecEventName } from '../domain/event-names.js';
import { isLosslessNumber } from 'lossless-json';
import { canonicalId, parseExact } from '../domain/canonical-id.js';
import { isIso8601 } from '../domain/iso-8601.js';
import type { NewLogEntry } from '../event-log/log-entry.js';
import { redactKey, redactKeyRestorably } from '../event-log/webhook-key.redaction.js';

/**
 * What a valid delivery contributes to its log entry: those fields as the entry holds them
 * (`rawBody`: the bytes to keep when they are not exactly the UTF-8 of `payload`, key redacted,
 * else null; `sha256`: of the received bytes), and where the webhook key was found.
 */
export type ParsedDelivery = Pick<
  NewLogEntry,
  | 'eventId'
  | 'eventType'
  | 'subjectType'
  | 'subjectId'
  | 'ownerId'
  | 'occurredAt'
  | 'eventSeq'
  | 'handled'
  | 'payload'
  | 'payloadUtf8'
  | 'rawBody'
  | 'sha256'
> & {
  /**
   * The body held the webhook key it was sent to, as bytes: it is redacted from them before anything
   * is read (so from `payload`, `rawBody` and every field), at these byte offsets.
   */
  keyAt: number[] | null;
  /** The key was found only in the decoded text (UTF-16): `rawBody` is the exact body, to be sealed. */
  sealWhole: boolean;
};

/** Why a delivery is refused: 415 for the media type, 400 (with the field at fault) for the body. */
export class DeliveryRejection extends Error {
  constructor(
    readonly status: 400 | 415,
    readonly field: string,
    detail: string,
  ) {
    super(detail);
  }
}

const MAX_ID_LENGTH = 255;
const MAX_TYPE_LENGTH = 100;
const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/** Checks the media type and returns the charset to decode with. */
export function mediaCharset(contentType: string | undefined): string {
  if (contentType === undefined)
    throw new DeliveryRejection(415, 'content-type', 'Content-Type must be application/json');
  const [mediaType, ...params] = contentType.split(';');
  if (mediaType.trim().toLowerCase() !== 'application/json') {
    throw new DeliveryRejection(415, 'content-type', 'Content-Type must be application/json');
  }
  const charset = params
    .map((param) => param.trim().split('='))
    .find(([name]) => name.trim().toLowerCase() === 'charset')?.[1];
  const label = charset?.trim().replace(/^"|"$/g, '').toLowerCase() ?? 'utf-8';
  if (decoder(label) === undefined) {
    throw new DeliveryRejection(415, 'content-type', `charset ${JSON.stringify(label.slice(0, 40))} is not supported`);
  }
  return label;
}

const decoders = new Map<string, TextDecoder>();

/** A fatal decoder per charset label, built once (decoding without `stream` keeps no state). */
function decoder(label: string): TextDecoder | undefined {
  let found = decoders.get(label);
  if (found === undefined) {
    try {
      found = new TextDecoder(label, { fatal: true });
    } catch {
      return undefined;
    }
    if (decoders.size < 64) decoders.set(label, found);
  }
  return found;
}

/**
 * Decodes and validates a delivery body (docs/reference.md §2). Pure: no I/O, no clock.
 * Every refusal names the field at fault, as a dotted path from the document root.
 * `key`, the webhook key the body was posted to, is redacted (see `keyAt` and `sealWhole`).
 */
export function parseDelivery(body: Buffer, contentType: string | undefined, key?: string): ParsedDelivery {
  const charset = mediaCharset(contentType);
  // The platform's events carry the callback URI, key included: redacted from the bytes before
  // anything reads them, so no column, log line or error message can hold it.
  const redacted = key === undefined ? null : redactKeyRestorably(body, key);
  const stored = redacted?.bytes ?? body;
  let text: string;
  try {
    text = decoder(charset)!.decode(stored);
  } catch {
    throw new DeliveryRejection(400, 'body', `the body is not valid ${charset}`);
  }
  // The bytes are stored once, as the payload text, when that text re-encodes to exactly them:
  // UTF-8 without a BOM, and no whitespace around the document (the log stores it trimmed).
  const utf8 = charset === 'utf-8' || charset === 'utf8' || charset === 'unicode-1-1-utf-8';
  const exact =
    utf8 &&
    !stored.subarray(0, 3).equals(UTF8_BOM) &&
    !isJsonSpace(text.charCodeAt(0)) &&
    !isJsonSpace(text.charCodeAt(text.length - 1));
  // A charset that does not hold the key as its ASCII bytes (UTF-16, or escape sequences splitting
  // it): redacted in the text, and the whole body kept sealed. UTF-8 text holds the key only where
  // the bytes did, so the search of the bytes settled it (the common case: no second scan).
  const sealWhole = !utf8 && key !== undefined && key !== '' && text.includes(key);
  if (sealWhole) text = redactKey(text, key);
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new DeliveryRejection(400, 'body', `the body is not JSON: ${(error as Error).message}`);
  }
  const root = object(document, '');
  const data = object(root.data, 'data');
  if (typeof data.id !== 'string') throw reject('data.id', 'must be a string');
  const eventId = requiredText(data.id, 'data.id', MAX_ID_LENGTH);
  if (data.type !== 'webhook_event') throw reject('data.type', 'must be "webhook_event"');
  const attributes = object(data.attributes, 'data.attributes');
  const eventType = requiredText(attributes.event_type, 'data.attributes.event_type', MAX_TYPE_LENGTH);
  const occurredAt = timestamp(attributes.created_at, 'data.attributes.created_at');
  const eventSeq =
    attributes.id === undefined || attributes.id === null ? null : integer(attributes.id, 'data.attributes.id');
  const relationships = object(data.relationships, 'data.relationships');
  const subject = object(
    object(relationships.subject, 'data.relationships.subject').data,
    'data.relationships.subject.data',
  );
  const subjectType = requiredText(subject.type, 'data.relationships.subject.data.type', MAX_TYPE_LENGTH);
  const owner = ownerData(relationships.resource_owner);
  if (root.included !== undefined && root.included !== null && !Array.isArray(root.included))
    throw reject('included', 'must be an array');
  const included = Array.isArray(root.included) ? root.included : [];
  // Numbers as ids are read from their own text (JSON.parse rounds beyond 2^53), by a second,
  // exact parse — only when some id is a number: the spec's ids are strings.
  const numericIds = [subject.id, owner?.id, ...included.map(idOf)].some((id) => typeof id === 'number')
    ? exactIds(text)
    : undefined;
  const subjectId = identifier(numericIds?.subject ?? subject.id, 'data.relationships.subject.data.id');
  const ownerId =
    owner === null ? null : identifier(numericIds?.owner ?? owner.id, 'data.relationships.resource_owner.data.id');
  const includedIds = included.map((resource, index) =>
    includedId(numericIds?.included[index] ?? idOf(resource), index),
  );
  const handled = isSpecEventName(eventType);
  if (handled) {
    const expected = eventType.slice(0, eventType.indexOf('.'));
    if (subjectType !== expected) {
      throw reject('data.relationships.subject.data.type', `must be "${expected}" for a ${eventType} event`);
    }
  }
  if (!eventType.endsWith('.destroyed')) {
    if (!Array.isArray(root.included)) throw reject('included', 'must be an array holding the subject resource');
    const found = included.some(
      (resource, index) =>
        typeof resource === 'object' &&
        resource !== null &&
        (resource as Record<string, unknown>).type === subjectType &&
        includedIds[index] === subjectId,
    );
    if (!found) throw reject('included', `must hold the subject resource ${subjectType} ${subjectId}`);
  }
  return {
    eventId,
    eventType,
    subjectType,
    subjectId,
    ownerId,
    occurredAt,
    eventSeq,
    handled,
    payload: text,
    payloadUtf8: exact ? stored : undefined,
    rawBody: sealWhole ? body : exact ? null : stored,
    keyAt: sealWhole ? null : (redacted?.at ?? null),
    sealWhole,
    sha256: hash('sha256', body, 'buffer'),
  };
}

/** JSON's insignificant whitespace: space, tab, line feed, carriage return. */
function isJsonSpace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
}

function reject(field: string, detail: string): DeliveryRejection {
  return new DeliveryRejection(400, field, `${field || 'the body'} ${detail}`);
}

function object(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw reject(field, 'must be an object');
  return value as Record<string, unknown>;
}

/** Text that PostgreSQL stores unchanged: no NUL, no lone surrogate. */
function storable(value: string): boolean {
  return !value.includes('\u0000') && value.isWellFormed();
}

function requiredText(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string' || value.length === 0) throw reject(field, 'must be a non-empty string');
  if (value.length > max) throw reject(field, `must be at most ${max} characters`);
  if (!storable(value)) throw reject(field, 'must not contain NUL characters or lone surrogates');
  return value;
}

function idOf(resource: unknown): unknown {
  return typeof resource === 'object' && resource !== null ? (resource as Record<string, unknown>).id : undefined;
}

/** The ids of the document read exactly (numbers as their text): subject, owner, and each of `included`. */
function exactIds(text: string): { subject: unknown; owner: unknown; included: unknown[] } {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the same document, already checked by the first parse
  const document = parseExact(text) as any;
  const included: unknown[] = Array.isArray(document.included) ? document.included : [];
  return {
    subject: document.data.relationships.subject.data.id,
    owner: document.data.relationships.resource_owner?.data?.id,
    included: included.map(idOf),
  };
}

/** Resource ids are strings in the spec; integral numbers are taken too, as their canonical text (canonicalId). */
function identifier(value: unknown, field: string): string {
  const text = canonicalId(value);
  if (text === undefined) throw reject(field, 'must be a string (or an integer)');
  return requiredText(text, field, MAX_ID_LENGTH);
}

/**
 * The canonical id of an `included` resource, or undefined when it has none; a number that is not
 * an integer id is refused, as the projector could not read it as one.
 */
function includedId(value: unknown, index: number): string | undefined {
  const text = canonicalId(value);
  if (text === undefined && (typeof value === 'number' || isLosslessNumber(value))) {
    throw reject(`included[${index}].id`, 'must be a string or an integer');
  }
  return text;
}

function integer(value: unknown, field: string): string {
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  if (typeof value === 'string' && /^-?\d{1,30}$/.test(value)) return value;
  throw reject(field, 'must be an integer');
}

function timestamp(value: unknown, field: string): string {
  if (!isIso8601(value)) {
    throw reject(field, 'must be an ISO 8601 timestamp such as 2024-01-31T12:00:00.000Z');
  }
  const year = Number(value.slice(0, 4));
  if (year < 1) throw reject(field, 'must be a timestamp after year 0');
  return value;
}

function ownerData(value: unknown): Record<string, unknown> | null {
  if (value === undefined || value === null) return null;
  const data = object(value, 'data.relationships.resource_owner').data;
  if (data === undefined || data === null) return null;
  return object(data, 'data.relationships.resource_owner.data');
}
