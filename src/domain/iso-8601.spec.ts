import { isIso8601 } from './iso-8601.js';

describe('isIso8601', () => {
  it('accepts dates and times with an offset that name real instants', () => {
    for (const text of [
      '2024-05-01T10:00:00.000Z',
      '2024-05-01T10:00Z',
      '2024-02-29T23:59:59.123456789+01:00',
      '2023-12-31T00:00:00-0530',
      '2024-05-01T24:00:00Z',
      '2024-05-01T24:00:00.000Z',
    ])
      expect({ text, ok: isIso8601(text) }).toEqual({ text, ok: true });
    expect(isIso8601('2024-02-29', { dateAlone: true })).toBe(true);
  });

  it('refuses impossible days and fields out of range, which Date.parse alone rolls over', () => {
    for (const text of [
      '2023-02-29T00:00:00Z',
      '2024-02-30T00:00:00Z',
      '2024-04-31T10:00:00Z',
      '2024-13-01T10:00:00Z',
      '2024-00-10T10:00:00Z',
      '2024-05-00T10:00:00Z',
      '2024-05-01T24:00:01Z',
      '2024-05-01T24:30:00Z',
      '2024-05-01T10:60:00Z',
      '2024-05-01T10:00:60Z',
      '2024-05-01T10:00:00+24:00',
      '2024-05-01T10:00:00+01:60',
      '2024-05-01T10:00:00',
      '2024-05-01',
      'yesterday',
    ])
      expect({ text, ok: isIso8601(text) }).toEqual({ text, ok: false });
    expect(isIso8601('2023-02-29', { dateAlone: true })).toBe(false);
    expect(isIso8601(20240501)).toBe(false);
  });
});
