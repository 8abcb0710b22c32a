import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { Change, ChangeEntry } from '../../src/changes/change.js';
import { START } from '../../src/changes/change.js';
import { loadConfig } from '../../src/config/app-config.js';
import { MetricsService } from '../../src/observability/metrics.service.js';
import { EgressGuard } from '../../src/sinks/egress/egress-guard.js';
import type { Sink } from '../../src/sinks/sink.js';
import { TableRefillRepository } from '../../src/sinks/tables/table-refill.repository.js';
import { TableSinksClient } from '../../src/sinks/tables/table-sinks.client.js';
import { collection, order, orderProduct, product, Resource, store, trait, traitOption } from './menu-events.js';

type Json = any;

/** A password as a test makes them: long, random, and with characters a URL must escape. */
export const makePassword = () => `pw/${randomBytes(12).toString('hex')}@:x`;

/** The daemon's database (`useDatabase`): the change log a re-created table is re-filled from. */
export type DaemonDatabase = { readonly dataSource: DataSource };

/** The daemon's table sinks client, its egress guard allowing `networks` (loopback by default). */
export function tableSinksClient(
  daemon: DaemonDatabase,
  networks = '127.0.0.0/8,::1/128',
): {
  client: TableSinksClient;
  metrics: MetricsService;
} {
  const config = loadConfig({ SINK_ALLOWED_NETWORKS: networks, TOKEN_ENCRYPTION_KEY: 'A'.repeat(43) + '=' });
  const metrics = new MetricsService();
  return { client: new TableSinksClient(new EgressGuard(config), metrics, liveResources(daemon)), metrics };
}

/** The daemon's change log as the source a re-created table is re-filled from. */
export const liveResources = (daemon: DaemonDatabase): TableRefillRepository =>
  new TableRefillRepository({ query: (sql: string, params?: unknown[]) => daemon.dataSource.query(sql, params) });

/**
 * A client whose egress guard allows nothing refuses every connection to the target, by address or
 * by name (docs/reference.md §12): a retry with status 0 and the guard's error, counted per sink.
 */
export async function expectEgressRefusedAtConnection(
  kind: 'postgres' | 'mysql',
  url: string,
  daemon: DaemonDatabase,
): Promise<void> {
  const { client, metrics } = tableSinksClient(daemon, '');
  const changes = new ChangeFactory();
  for (const target of [url, url.replace('@127.0.0.1:', '@localhost:')]) {
    const sink = tableSink(kind, target, { types: ['product'] });
    const outcome = await client.apply(sink, ['product'], [changes.upsert('o', product('1'))]);
    expect(outcome).toMatchObject({ kind: 'retry', status: 0 });
    expect((outcome as Json).error).toMatch(
      /^the egress guard refused (127\.0\.0\.1|::1) \(loopback\): add its network to SINK_ALLOWED_NETWORKS to allow it$/,
    );
    const counted = await metrics.registry.getSingleMetric('menu_sync_sink_egress_refused_total')!.get();
    expect(counted.values.find((value) => value.labels.sink === sink.id)?.value).toBe(1);
  }
  await client.beforeApplicationShutdown();
}

/** A table sink as the repository answers it, its target URL opened. */
export function tableSink(kind: 'postgres' | 'mysql', targetUrl: string, fields: Partial<Sink> = {}): Sink {
  return {
    id: `00000000-0000-4000-8000-${randomBytes(6).toString('hex')}`,
    kind,
    url: null,
    targetUrl,
    schema: kind === 'postgres' ? 'menu_sync' : null,
    tablePrefix: kind === 'mysql' ? 'menu_sync_' : null,
    layout: 'document',
    stream: null,
    subjectPrefix: null,
    types: null,
    ownerIds: null,
    batchSize: 100,
    timeoutMs: 5000,
    cursor: START,
    state: 'active',
    failingSince: null,
    lastSuccessAt: null,
    lastError: null,
    nextAttemptAt: null,
    attempts: 0,
    epoch: 0,
    inflight: null,
    snapshotTo: null,
    secret: null,
    previousSecret: null,
    previousSecretExpiresAt: null,
    createdAt: new Date(),
    updatedAt: new Date(),
    ...fields,
  };
}

/**
 * Changes as the change log gives them: each at its own position (transaction 100, seq = position),
 * the resource as the API shows it.
 */
export class ChangeFactory {
  private seq = 0;

  upsert(ownerId: string, resource: Resource, seq = ++this.seq): ChangeEntry {
    return this.entry(ownerId, resource, 'upsert', seq);
  }

  delete(ownerId: string, resource: Resource, seq = ++this.seq): ChangeEntry {
    return this.entry(ownerId, resource, 'delete', seq);
  }

  private entry(ownerId: string, resource: Resource, op: 'upsert' | 'delete', seq: number): ChangeEntry {
    this.seq = Math.max(this.seq, seq);
    const change: Change = {
      seq,
      change_id: `${resource.type}:${resource.id}:${seq}:test`,
      type: resource.type,
      id: resource.id,
      owner_id: ownerId,
      op,
      resource: {
        type: resource.type,
        id: resource.id,
        owner_id: ownerId,
        attributes: resource.attributes,
        relationships: resource.relationships,
        version: {
          event_id: `event-${seq}`,
          occurred_at: new Date(Date.UTC(2025, 0, 1, 0, 0, seq)).toISOString(),
          position: seq,
        },
        deleted: op === 'delete',
      },
      at: new Date().toISOString(),
    };
    return { change, position: { transactionId: '100', seq: String(seq) } };
  }
}

/** The ids of a relationship of a JSON:API resource, in order (what a `<relationship>_ids` column holds). */
export function idsOf(relationship: Json): string[] {
  const data = relationship?.data;
  if (data === null) return [];
  return (Array.isArray(data) ? data : [data]).map((identifier: Json) => String(identifier.id));
}

/** A target's JSON column as a value (MariaDB answers JSON as text). */
export const json = (value: unknown): Json => (typeof value === 'string' ? JSON.parse(value) : value);

const FIXED_COLUMNS = new Set(['owner_id', 'id', 'resource', 'version_occurred_at', 'seq', 'synced_at']);

/** A column value as JSON would show it: timestamps as ISO 8601, bigints and MySQL booleans as numbers / booleans. */
export function normalise(value: unknown, like: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  if (typeof like === 'boolean' && (value === 0 || value === 1)) return value === 1;
  if (typeof like === 'number' && typeof value === 'string') return Number(value);
  if (typeof like === 'string' && typeof value === 'string' && /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}/.test(like))
    return new Date(/Z$|[+-]\d{2}:\d{2}$/.test(value) ? value : `${value.replace(' ', 'T')}Z`).toISOString();
  if (typeof value === 'string' && (typeof like === 'object' || Array.isArray(like))) return JSON.parse(value);
  return value;
}

/**
 * What a target row should hold for a resource as the API shows it: every typed column equal to
 * its attribute (named without a trailing `?`), every `<relationship>_ids` the relationship's ids
 * in order, `resource` the resource. `columns` are the table's columns as the target lists them.
 */
export function expectRowMatches(row: Record<string, unknown>, resource: Json, columns: string[]): void {
  const actual: Record<string, unknown> = {};
  const expected: Record<string, unknown> = {};
  for (const column of columns) {
    if (FIXED_COLUMNS.has(column)) continue;
    if (column.endsWith('_ids')) {
      const relationship = resource.relationships?.[column.slice(0, -4)];
      expected[column] = relationship === undefined ? null : idsOf(relationship);
      actual[column] = json(row[column]);
      continue;
    }
    const attribute = resource.attributes?.[column] ?? resource.attributes?.[`${column}?`] ?? null;
    expected[column] = attribute;
    actual[column] = row[column] === null ? null : normalise(row[column], attribute);
  }
  expect(actual).toEqual(expected);
  expect(json(row.resource)).toEqual(resource);
  expect(String(row.id)).toBe(resource.id);
  expect(String(row.owner_id)).toBe(resource.owner_id ?? '');
  const occurredAt = new Date(resource.version.occurred_at).toISOString();
  expect(normalise(row.version_occurred_at, occurredAt)).toBe(occurredAt);
}

/** The types a table sink can follow and their tables (the API's plural), order_product_trait_option aside. */
export const TABLE_TYPES: Record<string, string> = {
  collection: 'collections',
  product: 'products',
  trait: 'traits',
  trait_option: 'trait_options',
  order: 'orders',
  order_product: 'order_products',
  store: 'stores',
};
export const ALL_TYPES = Object.keys(TABLE_TYPES);

/** A committed batch's outcome (docs/reference.md §12): status `committed`, the target's answer spelled out. */
export const committed = (response: string) => ({ kind: 'ok', status: 'committed', response });

/** The columns of a products table, in order. */
export const PRODUCT_COLUMNS = [
  'owner_id',
  'id',
  'title',
  'description',
  'available',
  'base_cost',
  'traits_ids',
  'externally_managed_product_override_ids',
  'resource',
  'version_occurred_at',
  'seq',
  'synced_at',
];

/** One resource of every type for `owner-a` (spec-shaped attributes), then a product of `owner-b` with the same id. */
export function sampleBatch(changes: ChangeFactory): ChangeEntry[] {
  const resources = [
    collection('1', { productIds: ['10', '11'] }),
    product('10', { traitIds: ['20'], cents: 450 }),
    product('11', { available: false, extra: { colour: 'red' } }),
    trait('20', { optionIds: ['30', '31'], required: true }),
    traitOption('30', { traitId: '20', isDefault: true }),
    order('40', { orderProductIds: ['41'], storeId: '50', userId: '9', note: 'no onions' }),
    orderProduct('41', { productId: '10', quantity: 3 }),
    store('50'),
  ];
  return [
    ...resources.map((resource) => changes.upsert('owner-a', resource)),
    changes.upsert('owner-b', product('10', { title: 'Other owner' })),
  ];
}

/** Every table holds exactly a row per change of its type in `batch`, each matching its resource. */
export async function expectTablesMatch(
  batch: ChangeEntry[],
  rowsOf: (table: string) => Promise<Json[]>,
  columnsOf: (table: string) => Promise<string[]>,
): Promise<void> {
  const resources = new Map(
    batch.map((entry) => [`${entry.change.owner_id}/${entry.change.type}/${entry.change.id}`, entry.change.resource]),
  );
  for (const [type, table] of Object.entries(TABLE_TYPES)) {
    const names = await columnsOf(table);
    const found = await rowsOf(table);
    expect(found.length).toBe(batch.filter((entry) => entry.change.type === type).length);
    for (const row of found) expectRowMatches(row, resources.get(`${row.owner_id}/${type}/${row.id}`), names);
  }
}

/** The sink as the daemon holds it once the target acknowledged `entries`. */
export const after = (sink: Sink, entries: ChangeEntry[]): Sink => ({
  ...sink,
  cursor: entries[entries.length - 1].position,
});

type Apply = (sink: Sink, entries: ChangeEntry[]) => Promise<unknown>;

/**
 * A delete removes the row; a replay (a new epoch), duplicates and an older change after a newer
 * one leave every row at its newest change and never bring the deleted one back; a newer upsert
 * does (the resource was made again). `state` answers the products as [id, title, seq] by id;
 * `tombstones` the sink's tombstones with seq as a number.
 */
export async function expectReplaysNeverMoveBack(
  sink: Sink,
  apply: Apply,
  state: () => Promise<Array<[string, string, number]>>,
  tombstones: () => Promise<Json[]>,
): Promise<void> {
  const changes = new ChangeFactory();
  const first = [
    changes.upsert('o', product('1', { title: 'v1' })),
    changes.upsert('o', product('2', { title: 'v1' })),
  ];
  const second = [
    changes.upsert('o', product('1', { title: 'v2' })),
    changes.delete('o', product('2')),
    changes.upsert('o', product('3')),
  ];
  expect(await apply(sink, first)).toEqual(committed('committed: 2 changes, one per row (2 upserts, 0 deletes)'));
  expect(await apply(after(sink, first), second)).toEqual(
    committed('committed: 3 changes, one per row (2 upserts, 1 delete)'),
  );
  const expected = [
    ['1', 'v2', 3],
    ['3', 'Product 3', 5],
  ];
  expect(await state()).toEqual(expected);

  const replay = { ...sink, epoch: 1 };
  expect(await apply(replay, first)).toEqual(committed('committed: 2 changes, one per row (2 upserts, 0 deletes)'));
  expect(await state()).toEqual(expected);
  expect(await apply(after(replay, first), second)).toEqual(
    committed('committed: 3 changes, one per row (2 upserts, 1 delete)'),
  );
  expect(await state()).toEqual(expected);
  const duplicates = [first[1], first[1], first[0], second[0], first[0]];
  expect(await apply({ ...sink, epoch: 2 }, duplicates)).toEqual(
    committed('committed: 2 changes, one per row (2 upserts, 0 deletes)'),
  );
  expect(await state()).toEqual(expected);
  expect(await tombstones()).toEqual([{ type: 'product', owner_id: 'o', id: '2', seq: 4 }]);

  const recreated = [changes.upsert('o', product('2', { title: 'back' }))];
  expect(await apply({ ...sink, epoch: 2, cursor: duplicates[4].position }, recreated)).toEqual(
    committed('committed: 1 change, one per row (1 upsert, 0 deletes)'),
  );
  expect(await state()).toEqual([
    ['1', 'v2', 3],
    ['2', 'back', 6],
    ['3', 'Product 3', 5],
  ]);
}
