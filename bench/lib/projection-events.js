// The projection bench's event log: 1M webhook events of the spec's shape, written by PostgreSQL
// itself (INSERT … SELECT FROM generate_series, payloads concatenated as text), plus the JS body of
// a fresh product.updated for the freshness measurement. Both build resources the same way.
import { randomUUID } from 'node:crypto';

/** The menu the log describes; ids of each type live in their own range. */
export const MENU = { products: 50_000, traits: 5_000, traitOptions: 20_000, collections: 500, owners: 5 };
const BASE = {
  product: 100_000,
  trait: 200_000,
  trait_option: 300_000,
  collection: 400_000,
  store: 900_000,
  user: 700_000,
};
const OWNER_BASE = 1000;

/** Milliseconds between consecutive events' created_at (1M events span ~24 h). */
const STEP_MS = 87;

const DESCRIPTION = (
  'Slow-roasted pulled pork shoulder in a brioche bun with house slaw, pickles and smoked chipotle mayo, ' +
  'served with skin-on fries and a pot of barbecue sauce. Charred sweetcorn, crispy shallots and a wedge of lime on the side; ' +
  'ask for the vegan version with jackfruit and oat-milk aioli. Contains gluten, egg, mustard and celery. '
).repeat(3);

/*
 * Event mix, per 10,000 events after the creation phase (which creates every trait, trait option,
 * product and collection once, in that order): thresholds on r = hash(i) % 10000.
 */
const MIX = [
  [200, 'order', 'created'],
  [215, 'product', 'destroyed'],
  [220, 'trait', 'destroyed'],
  [230, 'trait_option', 'destroyed'],
  [232, 'collection', 'destroyed'],
  [240, 'product', 'created'],
  [243, 'trait_option', 'created'],
  [244, 'trait', 'created'],
  [400, 'collection', 'updated'],
  [900, 'trait', 'updated'],
  [1700, 'trait_option', 'updated'],
  [10_000, 'product', 'updated'],
];

const CREATION = [
  ['trait', MENU.traits],
  ['trait_option', MENU.traitOptions],
  ['product', MENU.products],
  ['collection', MENU.collections],
];
export const CREATION_EVENTS = CREATION.reduce((sum, [, n]) => sum + n, 0);

const COUNT = {
  product: MENU.products,
  trait: MENU.traits,
  trait_option: MENU.traitOptions,
  collection: MENU.collections,
};

// --- SQL expression builders (text of SQL expressions over the columns of the generator) ---------

const q = (text) => `'${text.replace(/'/g, "''")}'`;
const bool = (expr) => `CASE WHEN ${expr} THEN 'true' ELSE 'false' END`;
const money = (cents) =>
  `'{"GBP":{"cents":' || (${cents}) || ',"format":"£' || ((${cents}) / 100) || '.' || lpad(((${cents}) % 100)::text, 2, '0') || '","currency":{"iso_code":"GBP"}}}'`;
const ref = (id, type) => `'{"id":"' || (${id}) || '","type":"${type}"}'`;
const desc = (from, length) => `substr(${q(DESCRIPTION)}::text, (1 + (${from}))::int, (${length})::int)`;
const iso = (ts) => `to_char((${ts}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

function productSql(id, rev, h, h2) {
  const traits = (j) => ref(`${BASE.trait + 1} + ((${id}) * 7 + ${j * 131}) % ${MENU.traits}`, 'trait');
  return `'{"id":"' || ${id} || '","type":"product","attributes":{"id":' || ${id} || ',"title":"Product ' || ${id} || ' rev ' || ${rev}
    || '","description":"' || ${desc(`${h} % 200`, `200 + ${h2} % 200`)} || '","available":' || ${bool(`${h} % 10 <> 0`)}
    || ',"base_cost":' || ${money(`300 + ${h2} % 2000`)} || '},"relationships":{"traits":{"data":[' || ${traits(0)} || ',' || ${traits(1)}
    || CASE WHEN (${id}) % 3 >= 1 THEN ',' || ${traits(2)} ELSE '' END || CASE WHEN (${id}) % 3 = 2 THEN ',' || ${traits(3)} ELSE '' END
    || ']},"externally_managed_product_override":{"data":null}}}'`;
}

function traitSql(id, rev, h, h2) {
  const option = (j) => ref(`${BASE.trait_option + 1} + ((${id}) - ${BASE.trait + 1}) * 4 + ${j}`, 'trait_option');
  return `'{"id":"' || ${id} || '","type":"trait","attributes":{"id":' || ${id} || ',"title":"Trait ' || ${id} || ' rev ' || ${rev}
    || '","description":"' || ${desc(`${h} % 300`, `60 + ${h2} % 80`)} || '","required":' || ${bool(`${h} % 2 = 0`)}
    || ',"allow_multiple":' || ${bool(`${h2} % 3 = 0`)} || '},"relationships":{"trait_options":{"data":['
    || ${option(0)} || ',' || ${option(1)} || ',' || ${option(2)} || ',' || ${option(3)} || ']}}}'`;
}

function traitOptionSql(id, rev, h, h2) {
  const trait = `${BASE.trait + 1} + ((${id}) - ${BASE.trait_option + 1}) / 4`;
  return `'{"id":"' || ${id} || '","type":"trait_option","attributes":{"id":' || ${id} || ',"title":"Option ' || ${id} || ' rev ' || ${rev}
    || '","description":' || CASE WHEN ${h} % 3 = 0 THEN 'null' ELSE '"' || ${desc(`${h} % 300`, `40 + ${h2} % 60`)} || '"' END
    || ',"available":' || ${bool(`${h} % 17 <> 0`)} || ',"default":' || ${bool(`(${id}) % 4 = 0`)}
    || ',"cost_adjustment":' || ${money(`(${h2} % 8) * 25`)} || '},"relationships":{"trait":{"data":' || ${ref(trait, 'trait')} || '}}}'`;
}

function collectionSql(id, rev, h) {
  return `'{"id":"' || ${id} || '","type":"collection","attributes":{"id":' || ${id} || ',"title":"Collection ' || ${id} || ' rev ' || ${rev}
    || '","description":"' || ${desc(`${h} % 300`, 80)} || '","position":' || ((${id}) % 50)
    || '},"relationships":{"products":{"data":['
    || (SELECT string_agg(${ref(`${BASE.product + 1} + ((${id}) * 97 + j * 4099) % ${MENU.products}`, 'product')}, ',')
          FROM generate_series(0, 11) AS j)
    || ']}}}'`;
}

const STORE_ATTRIBUTES = JSON.stringify({
  description: 'Neighbourhood kitchen and bar',
  brand_color: '#aa3300',
  latitude: 51.5072,
  longitude: -0.1276,
  opening_times: Object.fromEntries(
    ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'].map((day) => [
      day,
      [
        ['9:00', '14:30'],
        ['17:00', '22:30'],
      ],
    ]),
  ),
  status: 'open',
  demo: false,
  active: true,
  due_at_options_mode: 'basic',
  created_at: '2024-01-01T00:00:00.000Z',
  is_takeout: true,
  is_restaurant: true,
  geocoded_address: null,
  prevent_orders_being_placed_outside_of_opening_times: true,
  table_is_required_for_eat_in_orders: false,
  'accepting_orders?': true,
  due_at_options: [
    { text: 'As soon as possible', value: 0, type: 'relative' },
    { text: 'In 30 minutes', value: 30, type: 'relative' },
  ],
  logo: {
    x1: 'https://cdn.example/logo.png',
    x2: 'https://cdn.example/logo@2x.png',
    x3: 'https://cdn.example/logo@3x.png',
  },
  distance: null,
  walking_distance: null,
}).slice(1, -1);

/** The `included` of an order event: the order, its order products, their trait options, the trait options, products, store, user. */
function orderIncludedSql(orderId, owner, ts, i, h, h2) {
  const opId = (j) => `(${orderId}) * 10 + ${j}`;
  const optoId = (j) => `(${orderId}) * 100 + ${j}`;
  const toId = (j) => `${BASE.trait_option + 1} + ((${h2}) + ${j} * 977) % ${MENU.traitOptions}`;
  const productId = (j) => `${BASE.product + 1} + ((${h}) + ${j} * 7919) % ${MENU.products}`;
  const storeId = `${BASE.store} + (${owner}) - ${OWNER_BASE}`;
  const userId = `${BASE.user} + (${i}) % 5000`;
  const n = `(1 + (${h}) % 3)`;
  const perProduct = (fn) => `(SELECT string_agg(${fn('j')}, ',' ORDER BY j) FROM generate_series(0, ${n} - 1) AS j)`;
  const orderProduct = (j) => `'{"id":"' || ${opId(j)} || '","type":"order_product","attributes":{"id":' || ${opId(j)}
    || ',"note":null,"quantity":' || (1 + ${j}) || ',"total":' || (850 * (1 + ${j})) || ',"unit_total":850,"cost":{"cents":850,"format":"£8.50","currency":{"iso_code":"GBP"}}}'
    || ',"relationships":{"product":{"data":' || ${ref(productId(j), 'product')} || '},"order_product_trait_options":{"data":['
    || ${ref(optoId(j), 'order_product_trait_option')} || ']}}}'`;
  const opto = (
    j,
  ) => `'{"id":"' || ${optoId(j)} || '","type":"order_product_trait_option","attributes":{"id":' || ${optoId(j)}
    || ',"cost":{"cents":50,"format":"£0.50","currency":{"iso_code":"GBP"}}},"relationships":{"trait_option":{"data":'
    || ${ref(toId(j), 'trait_option')} || '}}}'`;
  const when = iso(ts);
  const order = `'{"id":"' || ${orderId} || '","type":"order","attributes":{"id":' || ${orderId} || ',"note":null,"due_at":"' || ${when}
    || '","for_pickup?":false,"status":"pending","created_at":"' || ${when}
    || '","order_dependencies_are_present_and_available_for_reorder?":true,"delivery_method":{"type":"eat_in","table":"T' || ((${h}) % 40)
    || '"},"subtotal":{"cents":1700,"format":"£17.00","currency":{"iso_code":"GBP"}},"total":{"cents":1800,"format":"£18.00","currency":{"iso_code":"GBP"}}'
    || ',"history":[{"transitioned_at_human":"just now","status":"pending","transitioned_at":"' || ${when} || '","most_recent":true}]}'
    || ',"relationships":{"order_products":{"data":[' || ${perProduct((j) => ref(opId(j), 'order_product'))}
    || ']},"store":{"data":' || ${ref(storeId, 'store')} || '},"user":{"data":' || ${ref(userId, 'user')}
    || '},"table":{"data":{"id":"' || ((${h}) % 40) || '","type":"table"}},"feedback":{"data":null}}}'`;
  const store = `'{"id":"' || ${storeId} || '","type":"store","attributes":{"id":' || ${storeId} || ',"title":"Store ' || ${storeId} || '",' || ${q(STORE_ATTRIBUTES)}
    || '},"relationships":{"photos":{"data":[]},"tables":{"data":[]},"loyalty_scheme":{"data":null}}}'`;
  const user = `'{"id":"' || ${userId} || '","type":"user","attributes":{"id":' || ${userId} || ',"first_name":"Sam","last_name":"Bench"}}'`;
  return `${order} || ',' || ${perProduct(orderProduct)} || ',' || ${perProduct(opto)}
    || ',' || ${perProduct((j) => traitOptionSql(toId(j), '0', h, h2))} || ',' || ${perProduct((j) => productSql(productId(j), '0', h, h2))}
    || ',' || ${store} || ',' || ${user}`;
}

/**
 * INSERT of events lo..hi ($1, $2; 1-based event numbers) into event_log; $3 is the first event's
 * created_at (ISO, ms). Columns as ingress fills them; transaction_id takes its default.
 * `ordersPer10k` (default MIX's 200) makes that share of the events after the creation phase
 * `order.created`, the menu events keeping their proportions in the rest (bench/lifecycle: 8000).
 */
export function fillSql({ ordersPer10k = MIX[0][0] } = {}) {
  const [[orderLimit], ...menu] = MIX;
  const scale = (10_000 - ordersPer10k) / (10_000 - orderLimit);
  const mix = [
    [ordersPer10k, 'order', 'created'],
    ...menu.map(([limit, type, kind]) => [
      limit === 10_000 ? 10_000 : Math.round(ordersPer10k + (limit - orderLimit) * scale),
      type,
      kind,
    ]),
  ];
  const creation = [];
  let upTo = 0;
  for (const [type, count] of CREATION) {
    creation.push({ type, from: upTo, to: upTo + count });
    upTo += count;
  }
  const stype = `CASE ${creation.map((c) => `WHEN i <= ${c.to} THEN '${c.type}'`).join(' ')}
                      ${mix.map(([limit, type]) => `WHEN r < ${limit} THEN '${type}'`).join(' ')} END`;
  const action = `CASE WHEN i <= ${CREATION_EVENTS} THEN 'created' ${mix.map(([limit, , kind]) => `WHEN r < ${limit} THEN '${kind}'`).join(' ')} END`;
  const sid = `CASE WHEN stype = 'order' THEN 1000000 + i
                    ${creation.map((c) => `WHEN i <= ${c.to} THEN ${BASE[c.type]} + i - ${c.from}`).join(' ')}
                    ${Object.entries(COUNT)
                      .map(([type, n]) => `WHEN stype = '${type}' THEN ${BASE[type] + 1} + h2 % ${n}`)
                      .join(' ')} END`;
  const owner = `${OWNER_BASE + 1} + (CASE WHEN stype = 'order' THEN i ELSE sid END) % ${MENU.owners}`;
  const resource = `CASE
      WHEN action = 'destroyed' THEN ''
      WHEN stype = 'product' THEN ${productSql('sid', 'i', 'h', 'h2')}
      WHEN stype = 'trait' THEN ${traitSql('sid', 'i', 'h', 'h2')}
      WHEN stype = 'trait_option' THEN ${traitOptionSql('sid', 'i', 'h', 'h2')}
      WHEN stype = 'collection' THEN ${collectionSql('sid', 'i', 'h')}
      WHEN stype = 'order' THEN ${orderIncludedSql('sid', 'owner', 'occurred_at', 'i', 'h', 'h2')}
    END`;
  const payload = `'{"data":{"id":"' || event_id || '","type":"webhook_event","attributes":{"id":' || i || ',"created_at":"' || ${iso('occurred_at')}
    || '","event_type":"' || event_type || '","uri":"https://menu-sync.example/webhooks/bench"},"relationships":{"subject":{"data":{"id":"'
    || sid || '","type":"' || stype || '"}},"resource_owner":{"data":{"id":"' || owner || '","type":"user"}}}},"included":[' || ${resource} || ']}'`;
  return `
    INSERT INTO event_log (event_id, event_type, subject_type, subject_id, owner_id, occurred_at, event_seq, source, handled,
                           received_at, key_id, content_type, payload, sha256)
    SELECT event_id, event_type, stype, sid::text, owner::text, occurred_at, i, 'webhook', true,
           occurred_at + (h % 400) * interval '1 millisecond', 'env:1', 'application/json', payload::json,
           sha256(convert_to(payload, 'UTF8'))
      FROM (SELECT *, ${payload} AS payload
              FROM (SELECT *, stype || '.' || action AS event_type, ${owner} AS owner
                      FROM (SELECT *, ${sid} AS sid
                              FROM (SELECT *, ${stype} AS stype, ${action} AS action
                                      FROM (SELECT i, h, h2, h % 10000 AS r,
                                                   $3::timestamptz + (i - 1) * interval '${STEP_MS} milliseconds' AS occurred_at,
                                                   md5('menu-sync-bench-' || i)::uuid::text AS event_id
                                              FROM generate_series($1::bigint, $2::bigint) AS i
                                             CROSS JOIN LATERAL (SELECT (i * 2654435761) % 4294967296 AS h,
                                                                        (i * 2246822519 + 3266489917) % 4294967296 AS h2) AS hashes) AS a) AS b) AS c) AS d
            OFFSET 0) AS e`;
}

/** created_at of the first of `events` events, so that the last one is a minute in the past. */
export function firstCreatedAt(events) {
  return new Date(Math.floor((Date.now() - 60_000 - events * STEP_MS) / 1000) * 1000).toISOString();
}

/** Ids of every product the log can hold. */
export function productIds() {
  return Array.from({ length: MENU.products }, (_, k) => String(BASE.product + 1 + k));
}

/** A fresh product.updated delivery for product `id` (new data.id, created_at now), as the upstream sends it. */
export function productUpdatedBody(id, seq) {
  const eventId = randomUUID();
  const cents = 300 + (seq % 2000);
  const traits = [0, 1, 2]
    .slice(0, 2 + (Number(id) % 3 >= 1 ? 1 : 0))
    .map((j) => ({ id: String(BASE.trait + 1 + ((Number(id) * 7 + j * 131) % MENU.traits)), type: 'trait' }));
  const body = JSON.stringify({
    data: {
      id: eventId,
      type: 'webhook_event',
      attributes: {
        id: seq,
        created_at: new Date().toISOString(),
        event_type: 'product.updated',
        uri: 'https://menu-sync.example/webhooks/bench',
      },
      relationships: {
        subject: { data: { id, type: 'product' } },
        resource_owner: { data: { id: String(OWNER_BASE + 1 + (Number(id) % MENU.owners)), type: 'user' } },
      },
    },
    included: [
      {
        id,
        type: 'product',
        attributes: {
          id: Number(id),
          title: `Product ${id} fresh ${seq}`,
          description: DESCRIPTION.slice(seq % 200, (seq % 200) + 300),
          available: true,
          base_cost: {
            GBP: {
              cents,
              format: `£${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, '0')}`,
              currency: { iso_code: 'GBP' },
            },
          },
        },
        relationships: { traits: { data: traits }, externally_managed_product_override: { data: null } },
      },
    ],
  });
  return { eventId, body };
}
