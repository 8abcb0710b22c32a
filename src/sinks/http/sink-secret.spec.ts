import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { generateSinkSecret, webhookSignature } from './sink-secret.js';

/** Any UTF-16 text, lone surrogates included (the library encodes them as U+FFFD, as node:crypto does). */
const anyText = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit)) });
const text = fc.oneof(
  anyText,
  fc.string({ unit: 'binary' }),
  fc.json(),
  fc.string({ unit: 'binary', minLength: 1000, maxLength: 20_000 }),
);
/** The library refuses a message without an id. */
const nonEmpty = text.filter((value) => value !== '');
const secret = fc
  .uint8Array({ minLength: 1, maxLength: 64 })
  .chain((key) => fc.constantFrom(`whsec_${Buffer.from(key).toString('base64')}`, Buffer.from(key).toString('base64')));
const instant = fc.integer({ min: 0, max: 4_102_444_800_000 });

describe('the webhook signature', () => {
  it('equals the standardwebhooks library’s for any secret, id, timestamp and body', () => {
    fc.assert(
      fc.property(secret, text, instant, text, (key, id, at, body) => {
        const seconds = Math.floor(at / 1000);
        expect(webhookSignature(key, id, seconds, body)).toBe(new Webhook(key).sign(id, new Date(at), body));
      }),
      { numRuns: 500 },
    );
  });

  it('verifies with the library’s Webhook.verify, also as one of two signatures during a rotation', () => {
    fc.assert(
      fc.property(nonEmpty, text, fc.integer({ min: -240, max: 240 }), (id, body, skew) => {
        const [current, previous] = [generateSinkSecret(), generateSinkSecret()];
        const seconds = Math.floor(Date.now() / 1000) + skew;
        const headers = {
          'webhook-id': id,
          'webhook-timestamp': String(seconds),
          'webhook-signature': [current, previous].map((key) => webhookSignature(key, id, seconds, body)).join(' '),
        };
        for (const key of [current, previous]) {
          expect(() => new Webhook(key).verify(body, headers, { jsonParse: false })).not.toThrow();
        }
        expect(() => new Webhook(generateSinkSecret()).verify(body, headers, { jsonParse: false })).toThrow(
          'No matching signature found',
        );
      }),
      { numRuns: 200 },
    );
  });

  it('is the specification’s example', () => {
    const key = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const body = '{"test": 2432232314}';
    expect(webhookSignature(key, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, body)).toBe(
      'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    );
  });
});
