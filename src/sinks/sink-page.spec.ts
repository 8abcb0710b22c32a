import { decodeSinkPageKey, encodeSinkPageKey, SinkPageKey } from './sink-page.js';

const ID = '0b9a4e52-6f3c-4d6e-9c1a-2f4b8e7d6c5a';
const AT = '2025-06-01T12:34:56.789012Z';
const base64url = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

describe('sink page cursors', () => {
  it.each<SinkPageKey>([
    { order: 'created', createdAt: AT, id: ID },
    { order: 'failing', rank: 0, failingSince: '2025-01-01T00:00:00.000000Z', createdAt: AT, id: ID },
    { order: 'failing', rank: 3, failingSince: 'infinity', createdAt: AT, id: ID },
  ])('decodes what it encodes, in its own order (%o)', (key) => {
    const cursor = encodeSinkPageKey(key);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeSinkPageKey(cursor, key.order)).toEqual(key);
    expect(() => decodeSinkPageKey(cursor, key.order === 'created' ? 'failing' : 'created')).toThrow(
      expect.objectContaining({ status: 400, extra: { field: 'after' } }),
    );
  });

  it.each([
    ['not base64url', 'a+b/c'],
    ['too long', 'A'.repeat(201)],
    ['no order', base64url(`${AT} ${ID}`)],
    ['a time without microseconds', base64url(`c 2025-06-01T12:34:56.789Z ${ID}`)],
    ['an id that is no uuid', base64url(`c ${AT} 42`)],
    ['an uppercase id', base64url(`c ${AT} ${ID.toUpperCase()}`)],
    ['a rank out of range', base64url(`f 4 infinity ${AT} ${ID}`)],
    ['a field too many', base64url(`c ${AT} ${ID} x`)],
  ])('refuses %s with a 400 naming after', (_name, cursor) => {
    expect(() => decodeSinkPageKey(cursor, 'created')).toThrow(
      expect.objectContaining({ status: 400, extra: { field: 'after' } }),
    );
    expect(() => decodeSinkPageKey(cursor, 'failing')).toThrow(
      expect.objectContaining({ status: 400, extra: { field: 'after' } }),
    );
  });
});
