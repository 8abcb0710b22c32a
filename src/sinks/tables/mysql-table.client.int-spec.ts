import { createMysqlTarget, mysqlColumns, MysqlTarget } from '../../../test/support/mariadb.js';
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
  json,
  PRODUCT_COLUMNS,
  sampleBatch,
  tableSink,
  tableSinksClient,
} from '../../../test/support/table-sinks.js';
import type { ChangeEntry } from '../../changes/change.js';
import { encodeChangeCursor } from '../../changes/change-cursor.js';
import type { Sink } from '../sink.js';

type Json = any;

describe('MySQL table sink client (the real MariaDB, a user with a password)', () => {
  let target: MysqlTarget;
  const daemon = useDatabase(2);
  const { client } = tableSinksClient(daemon);

  const rows = async (table: string): Promise<Json[]> =>
    (await target.admin.query(`SELECT * FROM \`${table}\` ORDER BY owner_id, id`))[0] as Json[];
  const apply = (sink: Sink, entries: ChangeEntry[]) => client.apply(sink, sink.types ?? ALL_TYPES, entries);

  beforeAll(async () => {
    target = await createMysqlTarget();
  });

  afterAll(async () => {
    await client.beforeApplicationShutdown();
    await target?.drop();
  });

  it('creates a prefixed table per followed type with typed columns equal to the attributes, and resource equal', async () => {
    const changes = new ChangeFactory();
    const sink = tableSink('mysql', target.url, { types: ALL_TYPES });
    const batch = [...sampleBatch(changes), changes.upsert('OWNER-B', product('10'))];
    expect(await apply(sink, batch)).toEqual(committed('committed: 10 changes, one per row (10 upserts, 0 deletes)'));
    await expectTablesMatch(
      batch,
      (table) => rows(`menu_sync_${table}`),
      (table) => mysqlColumns(target, `menu_sync_${table}`),
    );
    expect(await mysqlColumns(target, 'menu_sync_products')).toEqual(PRODUCT_COLUMNS);
    // Ids that differ only in case are two rows (binary collation).
    expect(
      (await rows('menu_sync_products')).map((row) => [row.owner_id, row.id, row.title, json(row.traits_ids)]),
    ).toEqual([
      ['OWNER-B', '10', 'Product 10', []],
      ['owner-a', '10', 'Product 10', ['20']],
      ['owner-a', '11', 'Product 11', []],
      ['owner-b', '10', 'Other owner', []],
    ]);
    const [cursors] = await target.admin.query(`SELECT sink_id, \`cursor\`, epoch FROM menu_sync_sink_cursors`);
    expect(cursors).toEqual([{ sink_id: sink.id, cursor: encodeChangeCursor(batch[9].position), epoch: 0 }]);
    expect(await client.targetCursor(sink)).toEqual({ cursor: { cursor: batch[9].position, epoch: 0 } });
  });

  it('a delete removes the row; replays, resends and duplicates never resurrect it nor move a row back in time', async () => {
    await expectReplaysNeverMoveBack(
      tableSink('mysql', target.url, { tablePrefix: 'replays_', types: ['product'] }),
      apply,
      async () => (await rows('replays_products')).map((row) => [row.id, row.title, row.seq]),
      async () => (await target.admin.query(`SELECT type, owner_id, id, seq FROM replays_tombstones`))[0] as Json[],
    );
  });

  it('a batch the target already has (its cursor ahead) is not applied again; a partly applied one applies the rest', async () => {
    const changes = new ChangeFactory();
    const sink = tableSink('mysql', target.url, { tablePrefix: 'once_', types: ['product'] });
    const batch = [1, 2, 3, 4].map((n) => changes.upsert('o', product(String(n))));
    expect(await apply(sink, batch.slice(0, 2))).toEqual(
      committed('committed: 2 changes, one per row (2 upserts, 0 deletes)'),
    );
    await target.admin.query(`DELETE FROM once_products WHERE id = '1'`);
    expect(await apply(sink, batch.slice(0, 2))).toEqual(
      committed("committed before: the target's cursor covers this batch"),
    );
    expect(await apply(sink, batch)).toEqual(committed('committed: 2 changes, one per row (2 upserts, 0 deletes)'));
    expect((await rows('once_products')).map((row) => row.id)).toEqual(['2', '3', '4']);
  });

  it("a column dropped, a privilege revoked, a wrong password: the database's code and message, never the password", async () => {
    const changes = new ChangeFactory();
    const sink = tableSink('mysql', target.url, { tablePrefix: 'hand_', types: ['product'] });
    const first = [changes.upsert('o', product('1'))];
    expect(await apply(sink, first)).toEqual(committed('committed: 1 change, one per row (1 upsert, 0 deletes)'));
    await target.admin.query(`ALTER TABLE hand_products DROP COLUMN title`);
    const next = [changes.upsert('o', product('2'))];
    const dropped = await apply(after(sink, first), next);
    expect(dropped).toEqual({
      kind: 'retry',
      status: 1054,
      error: "MySQL error ER_BAD_FIELD_ERROR (1054): Unknown column 'title' in 'INSERT INTO'",
    });
    expect(await apply(after(sink, first), next)).toEqual(
      committed(
        'committed: 1 change, one per row (1 upsert, 0 deletes); re-added hand_products.title (missing) and re-filled 1 row from their resource',
      ),
    );
    expect((await rows('hand_products')).map((row) => [row.id, row.title])).toEqual([
      ['1', 'Product 1'],
      ['2', 'Product 2'],
    ]);

    for (const host of ['%', 'localhost', '127.0.0.1'])
      await target.admin.query(`REVOKE INSERT, UPDATE, DELETE ON \`${target.database}\`.* FROM ?@?`, [
        target.user,
        host,
      ]);
    await client.release(sink.id);
    const third = [changes.upsert('o', product('3'))];
    const refused = await apply(after(sink, next), third);
    expect(refused).toMatchObject({ kind: 'retry', status: 1142 });
    expect((refused as Json).error).toMatch(
      /^MySQL error ER_TABLEACCESS_DENIED_ERROR \(1142\): INSERT, UPDATE command denied to user '[a-z0-9_]+'@'127\.0\.0\.1' for table `menu_sync_target_[0-9a-f_]+`\.`hand_products`$/,
    );
    for (const host of ['%', 'localhost', '127.0.0.1'])
      await target.admin.query(`GRANT ALL ON \`${target.database}\`.* TO ?@?`, [target.user, host]);
    await client.release(sink.id);
    expect(await apply(after(sink, next), third)).toEqual(
      committed('committed: 1 change, one per row (1 upsert, 0 deletes)'),
    );

    const wrong = tableSink('mysql', target.url.replace(encodeURIComponent(target.password), 'not-the-password'), {
      types: ['product'],
    });
    const denied = await apply(wrong, [changes.upsert('o', product('4'))]);
    expect(denied).toMatchObject({ kind: 'retry', status: 1045 });
    expect((denied as Json).error).toMatch(/^MySQL error ER_ACCESS_DENIED_ERROR \(1045\): Access denied for user/);
    for (const text of [JSON.stringify(dropped), JSON.stringify(refused), JSON.stringify(denied)]) {
      expect(text).not.toContain(target.password);
      expect(text).not.toContain('not-the-password');
    }
  });

  it('the egress guard judges every connection: SINK_ALLOWED_NETWORKS empty refuses loopback, by address or name, status 0, counted', async () => {
    await expectEgressRefusedAtConnection('mysql', target.url, daemon);
  });
});
