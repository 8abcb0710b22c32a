import { REDACTED } from '../observability/redacted.js';

/** `text` with every occurrence of `key` replaced by `[redacted]`. */
export function redactKey(text: string, key: string): string {
  return key === '' ? text : text.replaceAll(key, REDACTED);
}

const ENCODINGS: Array<(text: string) => Buffer> = [
  (text) => Buffer.from(text, 'utf8'),
  (text) => Buffer.from(text, 'utf16le'),
  (text) => Buffer.from(text, 'utf16le').swap16(),
];

/**
 * `body` with every occurrence of `key` replaced by `[redacted]` in the same encoding: as UTF-8
 * (which covers every ASCII-compatible charset, keys being URL-safe ASCII) and as UTF-16 LE and BE.
 * The same buffer when the key is not there. Not undone: for bodies kept only to be read (the
 * quarantine); the log's bytes use redactKeyRestorably.
 */
export function redactKeyEverywhere(body: Buffer, key: string): Buffer {
  if (key === '') return body;
  return ENCODINGS.reduce((bytes, encode) => replaceBytes(bytes, encode(key), encode(REDACTED))?.bytes ?? bytes, body);
}

/**
 * `body` with every occurrence of `key`'s UTF-8 (= ASCII) bytes replaced by `[redacted]`, and the
 * byte offsets of those replacements in the result; null when the key is not there. This covers
 * every ASCII-compatible charset; `restoreKey` undoes it exactly.
 */
export function redactKeyRestorably(body: Buffer, key: string): { bytes: Buffer; at: number[] } | null {
  return key === '' ? null : replaceBytes(body, Buffer.from(key, 'utf8'), Buffer.from(REDACTED, 'utf8'));
}

/** Every `needle` replaced, with the offsets of the replacements in the result; null when there is none. */
function replaceBytes(bytes: Buffer, needle: Buffer, replacement: Buffer): { bytes: Buffer; at: number[] } | null {
  let found = bytes.indexOf(needle);
  if (found === -1) return null;
  const parts: Buffer[] = [];
  const at: number[] = [];
  let from = 0;
  let length = 0;
  while (found !== -1) {
    parts.push(bytes.subarray(from, found), replacement);
    length += found - from;
    at.push(length);
    length += replacement.length;
    from = found + needle.length;
    found = bytes.indexOf(needle, from);
  }
  parts.push(bytes.subarray(from));
  return { bytes: Buffer.concat(parts), at };
}

/** The bytes `redactKeyRestorably` was given: `key` put back at each offset of `at`. */
export function restoreKey(bytes: Buffer, key: string, at: readonly number[]): Buffer {
  const replacement = Buffer.byteLength(REDACTED, 'utf8');
  const parts: Buffer[] = [];
  let from = 0;
  for (const offset of at) {
    parts.push(bytes.subarray(from, offset), Buffer.from(key, 'utf8'));
    from = offset + replacement;
  }
  parts.push(bytes.subarray(from));
  return Buffer.concat(parts);
}
