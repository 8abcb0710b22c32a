import { redactSecrets, responseHead } from './redact.js';

describe('redactSecrets (docs/reference.md §12)', () => {
  it.each([
    ['a signing secret', 'secret is whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw= ok', 'secret is whsec_[REDACTED] ok'],
    ['a bearer token', 'Authorization: Bearer abc.def-123', 'Authorization: [REDACTED]'],
    ['a bearer token in prose', 'we got Bearer eyToken123 from you', 'we got Bearer [REDACTED] from you'],
    ['a JSON password', '{"user":"me","password":"hunter2"}', '{"user":"me","password":"[REDACTED]"}'],
    ['a query-string key', 'url?api_key=k123&x=1', 'url?api_key=[REDACTED]&x=1'],
    ['credentials in a URL', 'postgres://menu:s3cret@db:5432/x', 'postgres://menu:[REDACTED]@db:5432/x'],
    ['a long hex key', `key ${'ab12'.repeat(16)} end`, 'key [REDACTED] end'],
    ['a long base64 key', `k ${'Ab3+/x'.repeat(8)}== end`, 'k [REDACTED] end'],
    ['a JWT', 'jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln', 'jwt [REDACTED]'],
  ])('redacts %s', (_name, text, expected) => {
    expect(redactSecrets(text)).toBe(expected);
  });

  it('leaves ordinary answers, ids and uuids alone, and redacting twice changes nothing more', () => {
    const text =
      '{"ok":true,"id":"msg_2fQ0Xb8bY1p2c3d4e5f6g7h8i9j0kLmN","change":"8d0f6a1e-2b7c-4e8a-9f00-1a2b3c4d5e6f"}';
    expect(redactSecrets(text)).toBe(text);
    const once = redactSecrets('whsec_abc Bearer xyz password=p "token": "t"');
    expect(once).toBe('whsec_[REDACTED] Bearer [REDACTED] password=[REDACTED] "token": "[REDACTED]"');
    expect(redactSecrets(once)).toBe(once);
  });

  it('keeps the first KiB of a body, without a character cut in two at the end', () => {
    expect(responseHead(new TextEncoder().encode('short'))).toBe('short');
    const body = new TextEncoder().encode(`${'x'.repeat(1023)}é and more`);
    expect(responseHead(body)).toBe('x'.repeat(1023));
    expect(responseHead(new TextEncoder().encode('y'.repeat(5000)))).toBe('y'.repeat(1024));
  });
});
