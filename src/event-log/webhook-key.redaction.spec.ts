import { REDACTED } from '../observability/redacted.js';
import { redactKey, redactKeyEverywhere } from './webhook-key.redaction.js';

const KEY = 'Kx9_-fQ2mZ8rT4vW1yB6nH3jL5pS7uA0cE2gI4kM6oQ';

describe('webhook key redaction', () => {
  it('replaces every occurrence of the key in text, and nothing else', () => {
    const text = `{"uri":"https://menu-sync.example/webhooks/${KEY}","again":"${KEY}${KEY}","other":"${KEY.slice(1)}"}`;
    expect(redactKey(text, KEY)).toBe(
      `{"uri":"https://menu-sync.example/webhooks/${REDACTED}","again":"${REDACTED}${REDACTED}","other":"${KEY.slice(1)}"}`,
    );
    expect(redactKey('{"uri":null}', KEY)).toBe('{"uri":null}');
  });

  it('keeps valid JSON valid when the key is inside strings', () => {
    const document = { data: { attributes: { uri: `https://h/webhooks/${KEY}` } }, list: [KEY, `x${KEY}y`] };
    expect(JSON.parse(redactKey(JSON.stringify(document), KEY))).toEqual({
      data: { attributes: { uri: `https://h/webhooks/${REDACTED}` } },
      list: [REDACTED, `x${REDACTED}y`],
    });
  });

  it('does nothing for an empty key', () => {
    expect(redactKey('abc', '')).toBe('abc');
    const bytes = Buffer.from('abc');
    expect(redactKeyEverywhere(bytes, '')).toBe(bytes);
  });

  it('replaces the key in bytes, several times, at the edges too', () => {
    const bytes = Buffer.from(`${KEY}-middle-${KEY}${KEY}`);
    expect(redactKeyEverywhere(bytes, KEY).toString()).toBe(`${REDACTED}-middle-${REDACTED}${REDACTED}`);
  });

  it('gives back the same buffer when the key is not there', () => {
    const bytes = Buffer.from(`{"uri":"https://h/webhooks/${KEY.slice(0, -1)}"}`);
    expect(redactKeyEverywhere(bytes, KEY)).toBe(bytes);
  });

  it('redacts in the encoding found: UTF-8 (with non-ASCII around it), UTF-16LE, UTF-16BE', () => {
    const text = `{"title":"Crème brûlée ☕","uri":"https://h/webhooks/${KEY}"}`;
    const expected = `{"title":"Crème brûlée ☕","uri":"https://h/webhooks/${REDACTED}"}`;
    expect(redactKeyEverywhere(Buffer.from(text, 'utf8'), KEY).toString('utf8')).toBe(expected);
    expect(redactKeyEverywhere(Buffer.from(text, 'utf16le'), KEY).toString('utf16le')).toBe(expected);
    const be = redactKeyEverywhere(Buffer.from(text, 'utf16le').swap16(), KEY);
    expect(Buffer.from(be).swap16().toString('utf16le')).toBe(expected);
  });

  it('leaves non-text bytes around the key untouched', () => {
    const bytes = Buffer.concat([Buffer.from([0xff, 0x00, 0xfe]), Buffer.from(KEY), Buffer.from([0x80])]);
    expect(
      redactKeyEverywhere(bytes, KEY).equals(
        Buffer.concat([Buffer.from([0xff, 0x00, 0xfe]), Buffer.from(REDACTED), Buffer.from([0x80])]),
      ),
    ).toBe(true);
  });
});
