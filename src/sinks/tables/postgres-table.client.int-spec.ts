import { AddressInfo, createServer } from 'node:net';
import pg from 'pg';
import { createPostgresTarget, postgresColumns, PostgresTarget } from '../../../test/support/postgres-target.js';
import { useDatabase } from '../../../test/support/database.js';
import { product } from '../../../test/support/menu-events.js';
import {
  after,
  ALL_TYPES,
  ChangeFactory,
  committed,
  expectEgressRefusedAtConnection,
  expectReplaysNeverMoveBack,
  expectTablesMatch,
  liveResources,
  PRODUCT_COLUMNS,
  sampleBatch,
  tableSink,
  tableSinksClient,
} from '../../../test/support/table-sinks.js';
import type { ChangeEntry } from '../../changes/change.js';
import { encodeChangeCursor } from '../../changes/change-cursor.js';
import { EgressRefusedError } from '../egress/egress-guard.js';
import type { Sink } from '../sink.js';
import { PostgresTableClient } from './postgres-table.client.js';
import { parseTableUrl, TableTarget } from './table-target.js';

type Json = any;

describe('PostgreSQL table sink client (a real target database, a role with a password)', () => {
  let pgTarget: PostgresTarget;
  let target: pg.Client;
  let role: string;
  let password: string;
  const daemon = useDatabase(2);
  const { client } = tableSinksClient(daemon);

  const rows = async (table: string, schema = 'menu_sync'): Promise<Json[]> =>
    (await target.query(`SELECT * FROM "${schema}"."${table}" ORDER BY owner_id, id`)).rows;
  const columns = (table: string, schema = 'menu_sync') => postgresColumns(pgTarget, schema, table);

  /** Applies entries as the worker does after the sink's cursor, and answers the outcome. */
  async function apply(sink: Sink, entries: ChangeEntry[]) {
    const outcome = await client.apply(sink, sink.types ?? ALL_TYPES, entries);
    return outcome;
  }
  /** The sink as the daemon would hold it after the target acknowledged `entries`. */

  beforeAll(async () => {
    pgTarget = await createPostgresTarget();
    ({ admin: target, role, password } = pgTarget);
  });

  afterAll(async () => {
    await client.beforeApplicationShutdown();
    await pgTarget?.drop();
  });

  it('creates the schema and a table per followed type with typed columns equal to the attributes, and resource equal', async () => {
    const changes = new ChangeFactory();
    const sink = tableSink('postgres', pgTarget.url, { types: ALL_TYPES });
    const batch = sampleBatch(changes);
    expect(await apply(sink, batch)).toEqual(committed('committed: 9 changes, one per row (9 upserts, 0 deletes)'));
    await expectTablesMatch(batch, rows, columns);
    expect(await columns('products')).toEqual(PRODUCT_COLUMNS);
    const types = await target.query(
      `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'menu_sync' AND table_name IN ('orders', 'order_products', 'stores')
        AND column_name IN ('for_pickup', 'due_at', 'quantity', 'latitude', 'delivery_method', 'order_products_ids', 'seq') ORDER BY column_name`,
    );
    expect(Object.fromEntries(types.rows.map((row) => [row.column_name, row.data_type]))).toEqual({
      delivery_method: 'jsonb',
      due_at: 'timestamp with time zone',
      for_pickup: 'boolean',
      latitude: 'double precision',
      order_products_ids: 'jsonb',
      quantity: 'bigint',
      seq: 'bigint',
    });
    const [ordered] = await rows('orders');
    expect(ordered.order_dependencies_are_present_and_available_for_reorder).toBe(true);
    expect(ordered.note).toBe('no onions');
    const products = await rows('products');
    expect(products.map((row) => [row.owner_id, row.id, row.title, row.traits_ids, Number(row.seq)])).toEqual([
      ['owner-a', '10', 'Product 10', ['20'], 2],
      ['owner-a', '11', 'Product 11', [], 3],
      ['owner-b', '10', 'Other owner', [], 9],
    ]);
    const cursor = await target.query(`SELECT sink_id, "cursor", epoch FROM menu_sync.menu_sync_sink_cursors`);
    expect(cursor.rows).toEqual([{ sink_id: sink.id, cursor: encodeChangeCursor(batch[8].position), epoch: '0' }]);
    expect(await client.targetCursor(sink)).toEqual({ cursor: { cursor: batch[8].position, epoch: 0 } });
  });

  it('a delete removes the row; an older upsert replayed later neither resurrects it nor moves a row back in time', async () => {
    await expectReplaysNeverMoveBack(
      tableSink('postgres', pgTarget.url, { schema: 'replays', types: ['product'] }),
      apply,
      async () => (await rows('products', 'replays')).map((row) => [row.id, row.title, Number(row.seq)]),
      async () => (await target.query(`SELECT type, owner_id, id, seq::int FROM replays.menu_sync_tombstones`)).rows,
    );
  });

  it('never applies a change twice: a batch the target already has (its cursor ahead) is skipped, a partly applied one applies the rest', async () => {
    const changes = new ChangeFactory();
    const sink = tableSink('postgres', pgTarget.url, { schema: 'once', types: ['product'] });
    expect(await apply(sink, [changes.upsert('o', product('0'))])).toEqual(
      committed('committed: 1 change, one per row (1 upsert, 0 deletes)'),
    );
    await target.query(`
      CREATE TABLE once.applications (id text, seq bigint, n integer NOT NULL DEFAULT 1, PRIMARY KEY (id, seq));
      CREATE FUNCTION once.count_application() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO once.applications (id, seq) VALUES (NEW.id, NEW.seq)
            ON CONFLICT (id, seq) DO UPDATE SET n = once.applications.n + 1;
          RETURN NEW;
        END $$;
      CREATE TRIGGER count_application AFTER INSERT OR UPDATE ON once.products FOR EACH ROW EXECUTE FUNCTION once.count_application();
      GRANT ALL ON once.applications TO ${role};`);
    const base = { ...sink, cursor: { transactionId: '100', seq: '1' } };
    const batch = [1, 2, 3, 4, 5].map((n) => changes.upsert('o', product(String(n))));
    expect(await apply(base, batch.slice(0, 3))).toEqual(
      committed('committed: 3 changes, one per row (3 upserts, 0 deletes)'),
    );
    // By hand, the row of a change already applied is removed: only the cursor can tell it was applied.
    await target.query(`DELETE FROM once.products WHERE id = '1'`);
    // menu-sync stopped before recording that batch: it sends it again, then a longer one from the same cursor.
    expect(await apply(base, batch.slice(0, 3))).toEqual(
      committed("committed before: the target's cursor covers this batch"),
    );
    expect(await apply(base, batch)).toEqual(committed('committed: 2 changes, one per row (2 upserts, 0 deletes)'));
    expect(await apply(base, batch)).toEqual(committed("committed before: the target's cursor covers this batch"));
    const applications = await target.query(`SELECT id, seq::int, n FROM once.applications ORDER BY seq`);
    expect(applications.rows).toEqual([2, 3, 4, 5, 6].map((seq) => ({ id: String(seq - 1), seq, n: 1 })));
    expect((await rows('products', 'once')).map((row) => row.id)).toEqual(['0', '2', '3', '4', '5']);
    expect(await client.targetCursor(sink)).toEqual({ cursor: { cursor: batch[4].position, epoch: 0 } });

    // A target behind the sink's cursor (restored from a backup): nothing written, the sink is told to resume from it.
    const ahead = { ...sink, cursor: { transactionId: '100', seq: '50' } };
    const outcome = await apply(ahead, [changes.upsert('o', product('9'), 51)]);
    expect(outcome).toMatchObject({ kind: 'retry', status: 0 });
    expect((outcome as Json).error).toContain("is behind the sink's");
    expect((await rows('products', 'once')).map((row) => row.id)).toEqual(['0', '2', '3', '4', '5']);
  });

  it("a table changed by hand fails with the failing statement's error and code; the sink resumes once fixed", async () => {
    const changes = new ChangeFactory();
    const sink = tableSink('postgres', pgTarget.url, { schema: 'by_hand', types: ['product'] });
    const first = [changes.upsert('o', product('1'))];
    expect(await apply(sink, first)).toEqual(committed('committed: 1 change, one per row (1 upsert, 0 deletes)'));

    await target.query(`ALTER TABLE by_hand.products DROP COLUMN title`);
    const next = [changes.upsert('o', product('2'))];
    const dropped = await apply(after(sink, first), next);
    expect(dropped).toEqual({
      kind: 'retry',
      status: '42703',
      error: 'PostgreSQL error 42703: column "title" of relation "products" does not exist',
    });
    // The sink re-adds the column before the next attempt, re-filled from each row's resource, and the batch applies.
    expect(await apply(after(sink, first), next)).toEqual(
      committed(
        'committed: 1 change, one per row (1 upsert, 0 deletes); re-added products.title (missing) and re-filled 1 row from their resource',
      ),
    );
    expect((await rows('products', 'by_hand')).map((row) => [row.id, row.title])).toEqual([
      ['1', 'Product 1'],
      ['2', 'Product 2'],
    ]);

    await target.query(`ALTER TABLE by_hand.products ADD CONSTRAINT no_threes CHECK (id <> '3')`);
    const third = [changes.upsert('o', product('3'))];
    for (let attempt = 0; attempt < 2; attempt++) {
      const outcome = await apply(after(sink, next), third);
      expect(outcome).toMatchObject({ kind: 'retry', status: '23514' });
      expect((outcome as Json).error).toMatch(
        /^PostgreSQL error 23514: new row for relation "products" violates check constraint "no_threes"/,
      );
    }
    await target.query(`ALTER TABLE by_hand.products DROP CONSTRAINT no_threes`);
    expect(await apply(after(sink, next), third)).toEqual(
      committed('committed: 1 change, one per row (1 upsert, 0 deletes)'),
    );
    expect((await rows('products', 'by_hand')).map((row) => row.id)).toEqual(['1', '2', '3']);
  });

  it('a privilege revoked surfaces with its code; a target down is a network error; neither shows the password', async () => {
    const changes = new ChangeFactory();
    const sink = tableSink('postgres', pgTarget.url, { schema: 'privileges', types: ['product'] });
    const first = [changes.upsert('o', product('1'))];
    expect(await apply(sink, first)).toEqual(committed('committed: 1 change, one per row (1 upsert, 0 deletes)'));
    await target.query(`REVOKE INSERT, UPDATE, DELETE ON privileges.products FROM ${role}`);
    const next = [changes.upsert('o', product('2'))];
    const refused = await apply(after(sink, first), next);
    expect(refused).toEqual({
      kind: 'retry',
      status: '42501',
      error: 'PostgreSQL error 42501: permission denied for table products',
    });
    await target.query(`GRANT INSERT, UPDATE, DELETE ON privileges.products TO ${role}`);
    expect(await apply(after(sink, first), next)).toEqual(
      committed('committed: 1 change, one per row (1 upsert, 0 deletes)'),
    );

    const closed = await new Promise<number>((resolve) => {
      const server = createServer();
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        server.close(() => resolve(port));
      });
    });
    const down = tableSink('postgres', pgTarget.url.replace(':5432/', `:${closed}/`), { types: ['product'] });
    const outcome = await apply(down, [changes.upsert('o', product('3'))]);
    expect(outcome).toEqual({ kind: 'retry', status: 0, error: 'PostgreSQL: ECONNREFUSED: cannot reach the database' });
    for (const text of [JSON.stringify(refused), JSON.stringify(outcome)]) {
      expect(text).not.toContain(password);
      expect(text).not.toContain(encodeURIComponent(password));
    }
  });

  it('the egress guard judges every connection: SINK_ALLOWED_NETWORKS empty refuses loopback, by address or name, status 0, counted', async () => {
    await expectEgressRefusedAtConnection('postgres', pgTarget.url, daemon);
  });

  it('a pool checks every new connection: once the address is refused, its next new connection fails', async () => {
    let refused = false;
    let resolved = 0;
    const pool = new PostgresTableClient({
      target: parseTableUrl('postgres', pgTarget.url) as TableTarget,
      resolve: () => {
        resolved++;
        return refused ? Promise.reject(new EgressRefusedError('127.0.0.1', 'loopback')) : Promise.resolve('127.0.0.1');
      },
      schema: 'pooled',
      timeoutMs: 5000,
    });
    const changes = new ChangeFactory();
    const sink = tableSink('postgres', pgTarget.url, { schema: 'pooled', types: ['product'] });
    const batch = (entries: ChangeEntry[]) => ({
      sinkId: sink.id,
      epoch: sink.epoch,
      types: ['product'],
      expected: sink.cursor,
      entries,
      ownerIds: null,
      snapshotTo: null,
      live: liveResources(daemon),
    });
    await pool.apply(batch([changes.upsert('o', product('1'))]));
    expect(resolved).toBe(1);
    // What a DNS change amounts to for a pool that outlives it: the idle connection serves on, a new one is refused.
    refused = true;
    const [reused, opened] = await Promise.allSettled([
      pool.apply(batch([changes.upsert('o', product('2'))])),
      pool.apply(batch([changes.upsert('o', product('3'))])),
    ]);
    expect(reused.status).toBe('fulfilled');
    expect(opened).toMatchObject({
      status: 'rejected',
      reason: { code: 'EGRESS_REFUSED', message: expect.stringContaining('the egress guard refused 127.0.0.1') },
    });
    expect(resolved).toBe(2);
    await pool.close();
  });
});
