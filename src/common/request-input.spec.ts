import { findBadInput, MAX_PARAMETER_CHARS } from './request-input.js';

const fieldOf = (url: string, params: Record<string, unknown> = {}) => findBadInput({ url, params })?.extra.field;

describe('findBadInput: the one check of path and query values', () => {
  it('names the path parameter holding a NUL, a lone surrogate or an over-long value', () => {
    expect(fieldOf('/x', { id: 'abc\0def' })).toBe('id');
    expect(fieldOf('/x', { id: 'a\uD800' })).toBe('id');
    expect(fieldOf('/x', { id: '\uDC00a' })).toBe('id');
    expect(fieldOf('/x', { id: 'x'.repeat(MAX_PARAMETER_CHARS + 1) })).toBe('id');
    expect(fieldOf('/x', { '*': 'a\0' })).toBe('path');
  });

  it('names the query parameter whose value is undecodable, holds a NUL or is over-long', () => {
    expect(fieldOf('/x?owner_id=%00')).toBe('owner_id');
    expect(fieldOf('/x?a=1&owner_id=%ZZ')).toBe('owner_id');
    expect(fieldOf('/x?owner_id=%ED%A0%80')).toBe('owner_id');
    expect(fieldOf('/x?owner_id=%')).toBe('owner_id');
    expect(fieldOf(`/x?cursor=${'a'.repeat(MAX_PARAMETER_CHARS + 1)}`)).toBe('cursor');
    expect(fieldOf('/x?a%00b=1')).toBe('a\uFFFDb');
    expect(fieldOf('/x?%E0=1')).toBe('%E0');
  });

  it('lets ordinary values through, including well-formed unicode, pairs, `+` and repeats', () => {
    expect(
      findBadInput({
        url: '/x?owner_id=42&as_of=2024-05-01T10%3A00%3A00Z&q=a+b&q=%F0%9F%98%80&flag',
        params: { id: 'caf\u00e9\uD83D\uDE00' },
      }),
    ).toBeUndefined();
    expect(findBadInput({ url: '/x', params: { id: 'x'.repeat(MAX_PARAMETER_CHARS) } })).toBeUndefined();
    expect(findBadInput({ url: '/x?', params: {} })).toBeUndefined();
  });
});
