// Webhook event bodies for the benchmarks, shaped like test/support/webhook-events.ts `realisticEvent`
// (a ~3 KB product.updated JSON:API document). Plain JS so the bench needs no test build.
// Bodies are produced from pre-serialised templates, so generating one costs a UUID and a few
// string concatenations: the load generator, which shares the machine's cores, stays cheap.
import { randomUUID } from 'node:crypto';

const SUBJECTS = 500;
const DESCRIPTION =
  'Slow-roasted pulled pork shoulder in a brioche bun with house slaw, pickles and smoked chipotle mayo. '.repeat(20);
const ID = '__BENCH_EVENT_ID__';
const SEQ = '__BENCH_SEQ__';
const CREATED = '__BENCH_CREATED_AT__';

/** The same document as realisticEvent(); placeholders where per-event values go. */
function document(subjectId, uri, owner) {
  return {
    data: {
      id: ID,
      type: 'webhook_event',
      attributes: { id: SEQ, created_at: CREATED, event_type: 'product.updated', uri },
      relationships: {
        subject: { data: { id: subjectId, type: 'product' } },
        resource_owner: { data: { id: owner, type: 'user' } },
      },
    },
    included: [
      {
        id: subjectId,
        type: 'product',
        attributes: {
          id: Number(subjectId),
          title: `Product ${subjectId}`,
          description: DESCRIPTION,
          available: true,
          base_cost: { GBP: { cents: 850, format: '£8.50', currency: { iso_code: 'GBP' } } },
        },
        relationships: {
          traits: { data: [{ id: '7', type: 'trait' }] },
          externally_managed_product_override: { data: null },
        },
      },
    ],
  };
}

/** [before id, before seq, before created_at, rest] for one subject. */
function template(subjectId, uri, owner) {
  const text = JSON.stringify(document(subjectId, uri, owner));
  const [a, rest1] = split(text, `"${ID}"`);
  const [b, rest2] = split(rest1, `"${SEQ}"`);
  const [c, d] = split(rest2, `"${CREATED}"`);
  return [a, b, c, d];
}

function split(text, token) {
  const at = text.indexOf(token);
  if (at < 0 || text.indexOf(token, at + 1) >= 0) throw new Error(`template token ${token} must occur once`);
  return [text.slice(0, at), text.slice(at + token.length)];
}

/**
 * A generator of distinct valid events: each call returns a new body (fresh UUID data.id, increasing
 * data.attributes.id, subjects cycling over 500 products), as a string. `uri` is the callback URI
 * the platform would put in `data.attributes.uri`: with the real key in it, as deliveries have.
 * `owner`, `firstSubject` and `subjects` pick the owner and the products (bench/scale-out reads a
 * menu of its own beside the one being written).
 */
export function eventBodies(
  uri = 'https://menu-sync.example/webhooks/key',
  { owner = '42', firstSubject = 1000, subjects = SUBJECTS } = {},
) {
  const templates = Array.from({ length: subjects }, (_, i) => template(String(firstSubject + i), uri, owner));
  let seq = 0;
  return function next() {
    seq++;
    const [a, b, c, d] = templates[seq % subjects];
    return `${a}"${randomUUID()}"${b}${seq}${c}"${new Date().toISOString()}"${d}`;
  };
}
