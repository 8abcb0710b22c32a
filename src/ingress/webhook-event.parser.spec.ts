import { createHash } from 'node:crypto';
import { webhookEvent } from '../../test/support/webhook-events.js';
import { DeliveryRejection, mediaCharset, parseDelivery } from './webhook-event.parser.js';
import { restoreKey } from '../event-log/webhook-key.redaction.js';

const JSON_TYPE = 'application/json';
const body = (value: unknown) => Buffer.from(JSON.stringify(value));

function rejection(run: () => unknown): DeliveryRejection {
  try {
    run();
  } catch (error) {
    if (error instanceof DeliveryRejection) return error;
    throw error;
  }
  throw new Error('expected a rejection');
}

describe('parseDelivery', () => {
  it('extracts the log columns of a valid delivery', () => {
    const event = webhookEvent({
      eventType: 'product.created',
      eventId: 'evt-1',
      subjectId: '17',
      seq: 99,
      createdAt: '2024-03-01T12:00:00.123Z',
      ownerId: '42',
    });
    const raw = body(event);
    const parsed = parseDelivery(raw, JSON_TYPE);
    expect(parsed).toMatchObject({
      eventId: 'evt-1',
      eventType: 'product.created',
      subjectType: 'product',
      subjectId: '17',
      ownerId: '42',
      occurredAt: '2024-03-01T12:00:00.123Z',
      eventSeq: '99',
      handled: true,
      payload: raw.toString(),
      rawBody: null,
    });
    expect(parsed.sha256.equals(createHash('sha256').update(raw).digest())).toBe(true);
    // The payload's UTF-8 is the body itself, handed over for the append.
    expect(parsed.payloadUtf8).toBe(raw);
  });

  it('keeps the raw bytes when they are not the payload text (BOM, other charset)', () => {
    const text = JSON.stringify(webhookEvent());
    const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
    expect(parseDelivery(withBom, JSON_TYPE)).toMatchObject({
      payload: text,
      payloadUtf8: undefined,
      rawBody: withBom,
    });
    const utf16 = Buffer.from(text, 'utf16le');
    expect(parseDelivery(utf16, 'application/json; charset=utf-16le')).toMatchObject({
      payload: text,
      payloadUtf8: undefined,
      rawBody: utf16,
    });
  });

  describe('ids read as the projector reads them (canonicalId)', () => {
    /** A product.created body whose subject id and included id are the given JSON texts. */
    const withIds = (subject: string, included: string, owner = '"42"') =>
      Buffer.from(
        JSON.stringify(webhookEvent({ eventType: 'product.created' }))
          .replace(/"subject":\{"data":\{"id":"[^"]*"/, `"subject":{"data":{"id":${subject}`)
          .replace(/"included":\[\{"id":"[^"]*"/, `"included":[{"id":${included}`)
          .replace(/"resource_owner":\{"data":\{"id":"[^"]*"/, `"resource_owner":{"data":{"id":${owner}`),
      );

    it.each([
      ['"1"', '1.0', '1'],
      ['"1"', '1e0', '1'],
      ['1.0', '"1"', '1'],
      ['12345678901234567890', '"12345678901234567890"', '12345678901234567890'],
      ['"12345678901234567891"', '12345678901234567891', '12345678901234567891'],
      ['"é🍕"', '"é🍕"', 'é🍕'],
    ])('takes subject %s with included id %s as subject %j', (subject, included, id) => {
      expect(parseDelivery(withIds(subject, included), JSON_TYPE).subjectId).toBe(id);
    });

    it('reads a large numeric owner id exactly', () => {
      expect(parseDelivery(withIds('"1"', '"1"', '98765432109876543210'), JSON_TYPE).ownerId).toBe(
        '98765432109876543210',
      );
    });

    it('does not take an included id that rounds to the subject (2^53 + 1 is not 2^53)', () => {
      expect(rejection(() => parseDelivery(withIds('"9007199254740992"', '9007199254740993'), JSON_TYPE)).field).toBe(
        'included',
      );
    });

    it.each([
      ['1.5', '"1.5"', 'data.relationships.subject.data.id'],
      ['"1"', '1.5', 'included[0].id'],
      ['"1"', '1e300', 'included[0].id'],
    ])('refuses subject %s with included id %s naming %s', (subject, included, field) => {
      const refused = rejection(() => parseDelivery(withIds(subject, included), JSON_TYPE));
      expect({ status: refused.status, field: refused.field }).toEqual({ status: 400, field });
    });
  });

  describe('with the webhook key in the body (the platform sends the callback URI)', () => {
    const KEY = 'Zq3_Xv8-Lm2Np7Rs4Tu9Wy1Ab6Cd0Ef5Gh2Jk8Mn3Pq';
    const withUri = (options: Parameters<typeof webhookEvent>[0] = {}) => {
      const event = webhookEvent(options) as { data: { attributes: Record<string, unknown> }; included: unknown[] };
      event.data.attributes.uri = `https://menu-sync.example/webhooks/${KEY}`;
      return event;
    };

    it('redacts the key from the bytes, says where, and hashes the exact bytes; restoring gives them back', () => {
      const raw = body(withUri());
      const parsed = parseDelivery(raw, JSON_TYPE, KEY);
      expect(parsed.payload).toBe(raw.toString().replace(KEY, '[redacted]'));
      expect(parsed.payload).not.toContain(KEY);
      expect(JSON.parse(parsed.payload).data.attributes.uri).toBe('https://menu-sync.example/webhooks/[redacted]');
      // The payload is the stored bytes: nothing else kept, nothing sealed but the key.
      expect(parsed).toMatchObject({ rawBody: null, sealWhole: false, keyAt: [raw.indexOf(KEY)] });
      expect(restoreKey(Buffer.from(parsed.payload), KEY, parsed.keyAt!).equals(raw)).toBe(true);
      expect(parsed.sha256.equals(createHash('sha256').update(raw).digest())).toBe(true);
      expect(parsed.payloadUtf8!.equals(Buffer.from(parsed.payload))).toBe(true);
    });

    it('keeps the redacted bytes when they are not the payload (a BOM, whitespace), still restorable', () => {
      const raw = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body(withUri()), Buffer.from('\n')]);
      const parsed = parseDelivery(raw, JSON_TYPE, KEY);
      expect(parsed.rawBody!.includes(KEY)).toBe(false);
      expect(restoreKey(parsed.rawBody!, KEY, parsed.keyAt!).equals(raw)).toBe(true);
    });

    it('changes nothing when the body does not hold the key, or no key is given', () => {
      const raw = body(webhookEvent());
      expect(parseDelivery(raw, JSON_TYPE, KEY)).toMatchObject({
        keyAt: null,
        sealWhole: false,
        rawBody: null,
        payload: raw.toString(),
      });
      const holding = body(withUri());
      expect(parseDelivery(holding, JSON_TYPE)).toMatchObject({
        keyAt: null,
        sealWhole: false,
        rawBody: null,
        payload: holding.toString(),
      });
    });

    it('finds the key in another charset (UTF-16) through the decoded text', () => {
      const raw = Buffer.from(JSON.stringify(withUri()), 'utf16le');
      const parsed = parseDelivery(raw, 'application/json; charset=utf-16le', KEY);
      expect(parsed).toMatchObject({ sealWhole: true, keyAt: null, rawBody: raw });
      expect(parsed.payload).not.toContain(KEY);
    });

    it('reads every field from the redacted text, and names no key in a refusal', () => {
      const inId = body(withUri({ eventId: `evt-${KEY}` }));
      expect(parseDelivery(inId, JSON_TYPE, KEY).eventId).toBe('evt-[redacted]');
      // JSON.parse quotes the text near a syntax error.
      const broken = Buffer.from(`{"uri":${KEY}}`);
      expect(rejection(() => parseDelivery(broken, JSON_TYPE, KEY)).message).not.toContain(KEY.slice(0, 6));
      const missing = withUri({ subjectId: KEY });
      missing.included = [];
      const error = rejection(() => parseDelivery(body(missing), JSON_TYPE, KEY));
      expect(error.field).toBe('included');
      expect(error.message).toContain('product [redacted]');
      expect(error.message).not.toContain(KEY);
    });
  });

  it('accepts a destroyed event without included', () => {
    const event = webhookEvent({ eventType: 'trait.destroyed', subjectId: '3' });
    delete (event as { included?: unknown }).included;
    expect(parseDelivery(body(event), JSON_TYPE)).toMatchObject({ eventType: 'trait.destroyed', subjectId: '3' });
  });

  it('marks an event type outside the spec as unhandled without checking its subject type', () => {
    const event = webhookEvent({ eventType: 'store.updated', subjectType: 'store', subjectId: '8' });
    expect(parseDelivery(body(event), JSON_TYPE)).toMatchObject({ handled: false, subjectType: 'store' });
  });

  it('takes integer resource ids as their decimal text', () => {
    const event = webhookEvent({ subjectId: '5' }) as {
      data: { relationships: { subject: { data: { id: unknown } } } };
    };
    event.data.relationships.subject.data.id = 5;
    expect(parseDelivery(body(event), JSON_TYPE).subjectId).toBe('5');
  });

  it.each([
    ['text/plain', 415],
    [undefined, 415],
    ['application/jsonx', 415],
    ['application/json; charset=klingon', 415],
  ])('refuses content type %p with %p', (contentType, status) => {
    expect(rejection(() => mediaCharset(contentType)).status).toBe(status);
  });

  it('accepts application/json in any case and with parameters', () => {
    expect(mediaCharset('Application/JSON; charset="UTF-8"')).toBe('utf-8');
  });

  const mutate = (change: (event: any) => void) => {
    const event = webhookEvent({ eventType: 'product.updated', subjectId: '11' });
    change(event);
    return body(event);
  };

  it.each<[string, Buffer, string]>([
    ['not JSON', Buffer.from('{"data":'), 'body'],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0x7d]), 'body'],
    ['an array', body([1]), ''],
    ['no data', body({ included: [] }), 'data'],
    ['data.id missing', mutate((e) => delete e.data.id), 'data.id'],
    ['data.id a number', mutate((e) => (e.data.id = 5)), 'data.id'],
    ['data.id with NUL', mutate((e) => (e.data.id = 'a\u0000b')), 'data.id'],
    ['data.id too long', mutate((e) => (e.data.id = 'x'.repeat(256))), 'data.id'],
    ['data.type wrong', mutate((e) => (e.data.type = 'event')), 'data.type'],
    ['created_at not ISO', mutate((e) => (e.data.attributes.created_at = 'yesterday')), 'data.attributes.created_at'],
    [
      'created_at impossible',
      mutate((e) => (e.data.attributes.created_at = '2024-13-01T00:00:00Z')),
      'data.attributes.created_at',
    ],
    ['attributes.id fractional', mutate((e) => (e.data.attributes.id = 1.5)), 'data.attributes.id'],
    ['event_type empty', mutate((e) => (e.data.attributes.event_type = '')), 'data.attributes.event_type'],
    ['subject missing', mutate((e) => delete e.data.relationships.subject), 'data.relationships.subject'],
    [
      'subject id lone surrogate',
      mutate((e) => (e.data.relationships.subject.data.id = '\ud800')),
      'data.relationships.subject.data.id',
    ],
    [
      'subject type mismatch',
      mutate((e) => (e.data.relationships.subject.data.type = 'collection')),
      'data.relationships.subject.data.type',
    ],
    ['included without subject', mutate((e) => (e.included = [])), 'included'],
    [
      'owner id an object',
      mutate((e) => (e.data.relationships.resource_owner.data.id = {})),
      'data.relationships.resource_owner.data.id',
    ],
  ])('rejects %s, naming %p', (_name, raw, field) => {
    const error = rejection(() => parseDelivery(raw, JSON_TYPE));
    expect(error.status).toBe(400);
    expect(error.field).toBe(field);
  });
});
