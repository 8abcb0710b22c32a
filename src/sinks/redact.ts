/** How much of a target's answer an attempt keeps (docs/reference.md §12). */
export const RESPONSE_HEAD_BYTES = 1024;

const REDACTED = '[REDACTED]';

/**
 * What looks like a secret in a target's answer or an error: signing secrets, bearer and basic
 * credentials, `key=value` pairs whose key names a secret, credentials in URLs, JWTs and long
 * hex or base64 strings (keys, hashes). Errs on the side of hiding: the text is diagnostic.
 */
const PATTERNS: Array<[RegExp, string]> = [
  [/\bwhsec_[A-Za-z0-9+/=_-]+/g, `whsec_${REDACTED}`],
  [/\b(sk|pk|rk)_(live|test)_[A-Za-z0-9]+/g, REDACTED],
  [/\b(Bearer|Basic|Token|Digest)(\s+)[^\s"',;]+/gi, `$1$2${REDACTED}`],
  [
    /((?:authorization|proxy-authorization|api[-_]?key|x-api-key|access[-_]?token|refresh[-_]?token|id[-_]?token|client[-_]?secret|secret|token|password|passwd|pwd|private[-_]?key|signature)["']?\s*[:=]\s*["']?)(?!\[REDACTED\])(?:(?:Bearer|Basic|Token|Digest)\s+)?[^\s"'&,;}]+/gi,
    `$1${REDACTED}`,
  ],
  [/(:\/\/[^/\s:@]*:)[^@\s/]+@/g, `$1${REDACTED}@`],
  [/\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g, REDACTED],
  [/\b[0-9a-fA-F]{32,}\b/g, REDACTED],
  [/(?<![A-Za-z0-9+/_-])(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[A-Za-z])[A-Za-z0-9+/_-]{40,}={0,2}/g, REDACTED],
];

export function redactSecrets(text: string): string {
  if (text === '') return text;
  let redacted = text;
  for (const [pattern, replacement] of PATTERNS) redacted = redacted.replace(pattern, replacement);
  return redacted;
}

/** The first KiB of an answer body as text (a character cut at the end dropped); redacted where it is recorded. */
export function responseHead(body: Uint8Array): string {
  const text = new TextDecoder().decode(body.subarray(0, RESPONSE_HEAD_BYTES));
  return body.length > RESPONSE_HEAD_BYTES ? text.replace(/\uFFFD+$/, '') : text;
}
