import {
  compactedAway,
  comparePositions,
  decodeChangeCursor,
  encodeChangeCursor,
  MalformedChangeCursorError,
} from './change-cursor.js';

describe('change cursors', () => {
  it('round-trip a position as a URL-safe string', () => {
    const position = { transactionId: '18446744073709551615', seq: '9223372036854775807' };
    const cursor = encodeChangeCursor(position);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeChangeCursor(cursor)).toEqual(position);
  });

  it.each([
    '',
    'not a cursor',
    '!!',
    Buffer.from('1.2.3').toString('base64url'),
    Buffer.from('01.2').toString('base64url'),
    Buffer.from('18446744073709551616.1').toString('base64url'),
    Buffer.from('-1.2').toString('base64url'),
    'a'.repeat(65),
  ])('refuse %j, naming the field', (cursor) => {
    expect(() => decodeChangeCursor(cursor, 'Last-Event-ID')).toThrow(MalformedChangeCursorError);
    try {
      decodeChangeCursor(cursor, 'Last-Event-ID');
    } catch (error) {
      expect((error as MalformedChangeCursorError).extra).toEqual({ field: 'Last-Event-ID' });
      expect((error as MalformedChangeCursorError).status).toBe(400);
    }
  });

  it('order positions by transaction id, then seq', () => {
    expect(comparePositions({ transactionId: '9', seq: '100' }, { transactionId: '10', seq: '1' })).toBe(-1);
    expect(comparePositions({ transactionId: '10', seq: '2' }, { transactionId: '10', seq: '1' })).toBe(1);
    expect(comparePositions({ transactionId: '10', seq: '1' }, { transactionId: '10', seq: '1' })).toBe(0);
  });

  it('a position below the compaction horizon has lost changes; the start of the log and the horizon itself have not', () => {
    const horizon = { transactionId: '10', seq: '5' };
    expect(compactedAway({ transactionId: '10', seq: '4' }, horizon)).toBe(true);
    expect(compactedAway({ transactionId: '9', seq: '99' }, horizon)).toBe(true);
    expect(compactedAway(horizon, horizon)).toBe(false);
    expect(compactedAway({ transactionId: '11', seq: '1' }, horizon)).toBe(false);
    expect(compactedAway({ transactionId: '0', seq: '0' }, horizon)).toBe(false);
  });
});
