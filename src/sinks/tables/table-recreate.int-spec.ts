import type { DataSource } from 'typeorm';
import { useDatabase } from '../../../test/support/database.js';
import { createMysqlTarget, MysqlTarget } from '../../../test/support/mariadb.js';
import { product } from '../../../test/support/menu-events.js';
import { createPostgresTarget, PostgresTarget } from '../../../test/support/postgres-target.js';
import { after, ChangeFactory, committed, tableSink, tableSinksClient } from '../../../test/support/table-sinks.js';
import type { ChangeEntry } from '../../changes/change.js';
import { encodeChangeCursor } from '../../changes/change-cursor.js';

type Json = any;

/** Writes entries of a ChangeFactory into the daemon's change log at their own positions (transaction 100, seq). */
async function record(dataSource: DataSource, entries: ChangeEntry[]): Promise<void> {
  for (const { change, position } of entries)
    await dataSource.query(
      `INSERT INTO change_log (seq, transaction_id, change_id, type, id, owner_id, op, resource)
       OVERRIDING SYSTEM VALUE VALUES ($1, $2::xid8, $3, $4, $5, $6, $7, $8::jsonb)`,
      [
        position.seq,
        position.transactionId,
        change.change_id,
        change.type,
        change.id,
        change.owner_id,
        change.op,
        JSON.stringify(change.resource),
      ],
    );
}

describe('a table the sink wrote before, found missing: re-created and re-filled at the target’s cursor (docs/reference.md §12)', () => {
  const daemon = useDatabase(2);
  const { client } = tableSinksClient(daemon);
  // One factory, one change log: the cases' changes have their own positions, each sink its own owner.
  const changes = new ChangeFactory();
  let pgTarget: PostgresTarget;
  let myTarget: MysqlTarget;

  beforeAll(async () => {
    [pgTarget, myTarget] = await Promise.all([createPostgresTarget(), createMysqlTarget()]);
  });

  afterAll(async () => {
    await client.beforeApplicationShutdown();
    await pgTarget?.drop();
    await myTarget?.drop();
  });

  const targets = {
    postgres: {
      url: () => pgTarget.url,
      fields: (name: string) => ({ schema: name }),
      table: () => 'products',
      drop: (name: string) => pgTarget.admin.query(`DROP TABLE "${name}".products`),
      rows: async (name: string): Promise<Json[]> =>
        (await pgTarget.admin.query(`SELECT id, title FROM "${name}".products ORDER BY id`)).rows,
    },
    mysql: {
      url: () => myTarget.url,
      fields: (name: string) => ({ tablePrefix: `${name}_` }),
      table: (name: string) => `${name}_products`,
      drop: (name: string) => myTarget.admin.query(`DROP TABLE \`${name}_products\``),
      rows: async (name: string): Promise<Json[]> =>
        (await myTarget.admin.query(`SELECT id, title FROM \`${name}_products\` ORDER BY id`))[0] as Json[],
    },
  } as const;

  it.each(['postgres', 'mysql'] as const)(
    '%s: the rows are the live resources at the target’s cursor, not the newer change log; the batch and the next ones apply on top',
    async (kind) => {
      const target = targets[kind];
      const name = `recreated_${kind}`;
      const owner = `owner-${kind}`;
      const sink = tableSink(kind, target.url(), { types: ['product'], ownerIds: [owner], ...target.fields(name) });
      const first = [1, 2, 3, 4].map((id) => changes.upsert(owner, product(String(id))));
      // The change log is ahead of the sink: product 1 renamed, product 2 deleted, product 5 created.
      const renamed = changes.upsert(owner, product('1', { title: 'Renamed 1' }));
      const deleted = changes.delete(owner, product('2'));
      const created = changes.upsert(owner, product('5'));
      await record(daemon.dataSource, [...first, renamed, deleted, created]);
      expect(await client.apply(sink, ['product'], first)).toEqual(
        committed('committed: 4 changes, one per row (4 upserts, 0 deletes)'),
      );

      await target.drop(name);
      // The client that wrote before meets the missing table; the next one re-creates it.
      expect(await client.apply(after(sink, first), ['product'], [renamed])).toMatchObject({ kind: 'retry' });
      const cursor = encodeChangeCursor(first[3].position);
      expect(await client.apply(after(sink, first), ['product'], [renamed])).toEqual(
        committed(
          `committed: 1 change, one per row (1 upsert, 0 deletes); re-created ${target.table(name)} (missing) and re-filled 4 rows from the change log at ${cursor}`,
        ),
      );
      expect(await target.rows(name)).toEqual([
        { id: '1', title: 'Renamed 1' },
        { id: '2', title: 'Product 2' },
        { id: '3', title: 'Product 3' },
        { id: '4', title: 'Product 4' },
      ]);

      expect(await client.apply(after(sink, [renamed]), ['product'], [deleted, created])).toEqual(
        committed('committed: 2 changes, one per row (1 upsert, 1 delete)'),
      );
      expect(await target.rows(name)).toEqual([
        { id: '1', title: 'Renamed 1' },
        { id: '3', title: 'Product 3' },
        { id: '4', title: 'Product 4' },
        { id: '5', title: 'Product 5' },
      ]);
    },
    60_000,
  );
});
