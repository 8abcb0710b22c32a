import { randomBytes } from 'node:crypto';
import { SecretCipher } from './secret-cipher.js';

describe('SecretCipher (AES-256-GCM, docs/reference.md §6)', () => {
  const cipher = SecretCipher.fromKey(randomBytes(32));

  it('opens what it sealed, and the sealed bytes do not contain the token', () => {
    const token = 'access-token-value-123';
    const sealed = cipher.seal(token, 'connection:1:access_token');
    expect(sealed.includes(Buffer.from(token))).toBe(false);
    expect(cipher.open(sealed, 'connection:1:access_token')).toBe(token);
  });

  it('seals the same token differently each time (random IV)', () => {
    expect(cipher.seal('t', 'a').equals(cipher.seal('t', 'a'))).toBe(false);
  });

  it('refuses a value bound to another row or column, a tampered value, or another key', () => {
    const sealed = cipher.seal('secret', 'connection:1:access_token');
    expect(() => cipher.open(sealed, 'connection:2:access_token')).toThrow();
    expect(() => cipher.open(sealed, 'connection:1:refresh_token')).toThrow();
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1] ^= 1;
    expect(() => cipher.open(tampered, 'connection:1:access_token')).toThrow();
    expect(() => SecretCipher.fromKey(randomBytes(32)).open(sealed, 'connection:1:access_token')).toThrow();
  });

  it('seals bytes that are not text, and opens them to the same bytes', () => {
    const raw = Buffer.from([0xff, 0xfe, 0x7b, 0x00, 0x80, 0x00]);
    const sealed = cipher.sealBytes(raw, 'event:e-1:raw');
    expect(cipher.openBytes(sealed, 'event:e-1:raw').equals(raw)).toBe(true);
    expect(() => cipher.openBytes(sealed, 'event:e-2:raw')).toThrow();
  });

  it('takes only a 32-byte key', () => {
    expect(() => SecretCipher.fromKey(randomBytes(16))).toThrow(/32 bytes/);
  });
});
