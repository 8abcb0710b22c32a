/** What a webhook key is replaced with wherever a delivery's body is kept readable. */
export const REDACTED = '[redacted]';

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
 * The same buffer when the key is not there.
 */
export function redactKeyBytes(body: Buffer, key: string): Buffer {
  if (key === '') return body;
  return ENCODINGS.reduce((bytes, encode) => replaceBytes(bytes, encode(key), encode(REDACTED)), body);
}

function replaceBytes(bytes: Buffer, needle: Buffer, replacement: Buffer): Buffer {
  let at = bytes.indexOf(needle);
  if (at === -1) return bytes;
  const parts: Buffer[] = [];
  let from = 0;
  while (at !== -1) {
    parts.push(bytes.subarray(from, at), replacement);
    from = at + needle.length;
    at = bytes.indexOf(needle, from);
  }
  parts.push(bytes.subarray(from));
  return Buffer.concat(parts);
}
