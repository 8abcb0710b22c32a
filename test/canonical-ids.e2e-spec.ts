import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { api, deliver, RunningDaemon, startDaemon } from './support/http.js';
import { eventually } from './support/eventually.js';

type Json = any;

const PATHS: Record<string, string> = {
  collection: 'collections',
  product: 'products',
  trait: 'traits',
  trait_option: 'trait_options',
  order: 'orders',
  order_product: 'order_products',
};

/** An id as the platform might write it: its canonical text, and a way to spell it in JSON. */
interface IdSpelling {
  canonical: string;
  spell: (variant: number) => string;
}

/** An integer id (beyond 2^53 too, negative too), spelled as a string, an integer, `n.0`, `ne0`, `n0e-1`, `n.000E+0`. */
const integerId = fc
  .tuple(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }))
  .map(([value]): ((unique: bigint) => IdSpelling) => (unique) => {
    const n = value * 1_000_000n + (value < 0n ? -unique : unique);
    const text = n.toString();
    const forms = [`"${text}"`, text, `${text}.0`, `${text}e0`, `${text}0e-1`, `${text}.000E+0`];
    return { canonical: text, spell: (variant) => forms[variant % forms.length] };
  });

/** A unicode string id, spelled as it is or with every non-ASCII character escaped. */
const stringId = fc
  .string({ unit: 'grapheme', minLength: 1, maxLength: 40 })
  .map((text): ((unique: bigint) => IdSpelling) => (unique) => {
    const id = `${text}·${unique}`;
    const escaped = JSON.stringify(id).replace(
      /[\u0080-\uffff]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
    return { canonical: id, spell: (variant) => (variant % 2 === 0 ? JSON.stringify(id) : escaped) };
  });

const anEvent = fc.record({
  type: fc.constantFrom('collection', 'product', 'trait', 'trait_option', 'order'),
  kind: fc.constantFrom('created', 'updated'),
  id: fc.oneof(integerId, stringId),
  subjectSpelling: fc.nat(11),
  includedSpelling: fc.nat(11),
  /** The subject behind another resource in `included`: the projector must search for it. */
  behind: fc.boolean(),
  lineId: integerId,
});

let unique = 1n;

/** The event's JSON text with ids spelled as generated; `expected` lists the resources the API must show. */
function eventText(spec: Json): { text: string; subjectId: string; expected: Array<{ type: string; id: string }> } {
  const id: IdSpelling = spec.id(unique++);
  const line: IdSpelling = spec.lineId(unique++);
  const resource = (type: string, idJson: string) =>
    `{"id":${idJson},"type":"${type}","attributes":{"title":"t"},"relationships":{}}`;
  const subject = resource(spec.type, id.spell(spec.includedSpelling));
  const others =
    spec.type === 'order'
      ? [resource('order_product', line.spell(spec.includedSpelling + 1))]
      : [resource('user', '"42"')];
  const included = spec.behind ? [...others, subject] : [subject, ...others];
  const text =
    `{"data":{"id":"${randomUUID()}","type":"webhook_event","attributes":{"id":1,"created_at":"${new Date().toISOString()}",` +
    `"event_type":"${spec.type}.${spec.kind}"},"relationships":{"subject":{"data":{"id":${id.spell(spec.subjectSpelling)},"type":"${spec.type}"}},` +
    `"resource_owner":{"data":{"id":"42","type":"user"}}}},"included":[${included.join(',')}]}`;
  const expected = [
    { type: spec.type, id: id.canonical },
    ...(spec.type === 'order' ? [{ type: 'order_product', id: line.canonical }] : []),
  ];
  return { text, subjectId: id.canonical, expected };
}

describe('ids: what ingress accepts, the projector applies under the same id (one canonical reading)', () => {
  let app: RunningDaemon;

  beforeAll(async () => {
    app = await startDaemon();
  });

  afterAll(async () => {
    await app?.close();
  });

  async function caughtUp(): Promise<Json[]> {
    return eventually(async () => {
      const status = await api(app.url, '/api/v1/projections');
      expect(status.json.data.map((p: Json) => p.lag)).toEqual(status.json.data.map(() => 0));
      return status.json.data;
    }, 15000);
  }

  it('applies every accepted event (nothing parked), and shows its resources under the id the log reports', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(anEvent, { minLength: 1, maxLength: 25 }), async (specs) => {
        const accepted: Array<{ position: number; subjectId: string; expected: Array<{ type: string; id: string }> }> =
          [];
        for (const spec of specs) {
          const event = eventText(spec);
          const answer = await deliver(app.url, event.text);
          expect({ status: answer.status, body: answer.json }).toEqual({
            status: 202,
            body: expect.objectContaining({ status: 'accepted' }),
          });
          accepted.push({ position: answer.json.position, subjectId: event.subjectId, expected: event.expected });
        }
        for (const projection of await caughtUp())
          expect({ name: projection.name, parked: projection.parked, error: projection.last_error }).toEqual({
            name: projection.name,
            parked: 0,
            error: null,
          });
        for (const { position, subjectId, expected } of accepted) {
          const entry = await api(app.url, `/api/v1/events/${position}`);
          expect(entry.json.subject.id).toBe(subjectId);
          for (const { type, id } of expected) {
            const shown = await api(app.url, `/api/v1/${PATHS[type]}/${encodeURIComponent(id)}`);
            expect({ type, id, status: shown.status, shownId: shown.json?.id }).toEqual({
              type,
              id,
              status: 200,
              shownId: id,
            });
          }
        }
      }),
      { numRuns: 12 },
    );
  });

  it('applies a subject "1" included as 1.0 (accepted before, then parked as "does not include its subject")', async () => {
    const text = eventText({
      type: 'product',
      kind: 'created',
      id: () => ({ canonical: '1', spell: (v: number) => (v === 0 ? '"1"' : '1.0') }),
      subjectSpelling: 0,
      includedSpelling: 1,
      behind: false,
      lineId: () => ({ canonical: '', spell: () => '""' }),
    }).text;
    const answer = await deliver(app.url, text);
    expect(answer.status).toBe(202);
    for (const projection of await caughtUp()) expect(projection.parked).toBe(0);
    const product = await api(app.url, '/api/v1/products/1');
    expect({ status: product.status, id: product.json.id, version: product.json.version?.position }).toEqual({
      status: 200,
      id: '1',
      version: answer.json.position,
    });
  });
});
