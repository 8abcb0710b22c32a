import { PRODUCT_COLUMNS } from '../../../test/support/table-sinks.js';
import type { Change, ChangeEntry } from '../../changes/change.js';
import { changesByType, describeDatabaseError, planBatch } from './table-batch.js';
import { relationshipIds, targetRow, targetTable, typedValue } from './table-columns.js';
import { schemaWork, sinkTables } from './table-schema.js';
import { maskTableUrl, parseTableUrl } from './table-target.js';

const change = (
  fields: Partial<Change> & { attributes?: Record<string, unknown>; relationships?: Record<string, unknown> },
): Change => ({
  seq: 1,
  change_id: 'c',
  type: 'order',
  id: '1',
  owner_id: 'o',
  op: 'upsert',
  at: '2025-01-01T00:00:00.000Z',
  ...fields,
  resource: {
    type: fields.type ?? 'order',
    id: fields.id ?? '1',
    owner_id: 'o',
    attributes: fields.attributes ?? {},
    relationships: fields.relationships ?? {},
    version: { event_id: 'e', occurred_at: '2025-01-01T10:00:00.123456Z', position: 1 },
    deleted: false,
  },
});
const entry = (seq: number, fields: Partial<Change> = {}): ChangeEntry => ({
  change: change({ seq, ...fields }),
  position: { transactionId: '7', seq: String(seq) },
});

describe('table columns (the spec attributes of each type)', () => {
  it('names columns as the attributes without a trailing ?, then one <relationship>_ids per relationship', () => {
    expect(targetTable('order').columns.map((column) => `${column.name}:${column.kind}`)).toEqual([
      'note:text',
      'due_at:timestamp',
      'for_pickup:boolean',
      'status:text',
      'created_at:timestamp',
      'order_dependencies_are_present_and_available_for_reorder:boolean',
      'delivery_method:json',
      'subtotal:json',
      'total:json',
      'history:json',
      'order_products_ids:json',
      'store_ids:json',
      'user_ids:json',
      'table_ids:json',
      'feedback_ids:json',
    ]);
    expect(targetTable('collection').columns.map((column) => column.name)).toEqual([
      'title',
      'description',
      'products_ids',
    ]);
    expect(targetTable('store').columns.find((column) => column.name === 'latitude')?.kind).toBe('number');
    expect(targetTable('order_product').name).toBe('order_products');
  });

  it('types values by the column, and a value of another type becomes null (the resource keeps it)', () => {
    const row = targetRow(
      targetTable('order'),
      change({
        attributes: {
          note: 42,
          'for_pickup?': true,
          status: 'pending',
          due_at: 'tomorrow',
          created_at: '2024-05-01T10:00:00.000Z',
          history: [{ status: 'pending' }],
        },
        relationships: {
          store: { data: { id: 5, type: 'store' } },
          order_products: { data: [{ id: '2' }, { id: '1' }] },
          user: { data: null },
        },
      }),
    );
    expect(row.values).toMatchObject({
      note: null,
      for_pickup: true,
      status: 'pending',
      due_at: null,
      created_at: '2024-05-01T10:00:00.000Z',
      history: [{ status: 'pending' }],
      store_ids: ['5'],
      order_products_ids: ['2', '1'],
      user_ids: [],
      table_ids: null,
    });
    expect(row.version_occurred_at).toBe('2025-01-01T10:00:00.123456Z');
    expect([
      typedValue('integer', 2 ** 60),
      typedValue('integer', 1.5),
      typedValue('integer', 7),
      typedValue('number', 1.5),
    ]).toEqual([null, null, 7, 1.5]);
    expect(relationshipIds({ data: [{ type: 'x' }] })).toBeNull();
  });
});

describe('a batch against the target cursor', () => {
  const batch = [entry(1), entry(2), entry(3)];
  it('applies all in a new epoch or without a cursor; skips what the target has in the same epoch', () => {
    const start = { transactionId: '0', seq: '0' };
    expect(planBatch(null, 0, start, batch)).toEqual({ kind: 'apply', entries: batch });
    expect(planBatch({ cursor: batch[2].position, epoch: 0 }, 1, start, batch)).toEqual({
      kind: 'apply',
      entries: batch,
    });
    expect(planBatch({ cursor: batch[2].position, epoch: 1 }, 1, start, batch)).toEqual({ kind: 'applied' });
    expect(planBatch({ cursor: batch[0].position, epoch: 1 }, 1, start, batch)).toEqual({
      kind: 'apply',
      entries: batch.slice(1),
    });
    expect(planBatch({ cursor: start, epoch: 1 }, 1, batch[0].position, batch.slice(1))).toEqual({
      kind: 'behind',
      target: start,
    });
  });

  it('keeps the newest change of each row (type, owner, id), grouped by type', () => {
    const grouped = changesByType([
      entry(1, { id: 'a' }),
      entry(2, { id: 'a', owner_id: 'p' }),
      entry(3, { id: 'a' }),
      entry(4, { type: 'store', id: 'a' }),
    ]);
    expect([...grouped].map(([type, changes]) => [type, changes.map((c) => c.seq)])).toEqual([
      ['order', [2, 3]],
      ['store', [4]],
    ]);
  });

  it('describes a database error by its code and message, a network error by its code, and never repeats the password', () => {
    expect(
      describeDatabaseError('PostgreSQL', { code: '28P01', message: 'password s3cret is wrong' }, 's3cret'),
    ).toEqual({
      status: '28P01',
      error: 'PostgreSQL error 28P01: password *** is wrong',
    });
    expect(describeDatabaseError('MySQL', { code: 'ER_X', errno: 1, message: 'm' }, null)).toEqual({
      status: 1,
      error: 'MySQL error ER_X (1): m',
    });
    expect(
      describeDatabaseError('MySQL', { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 10.0.0.1:3306' }, null),
    ).toEqual({
      status: 0,
      error: 'MySQL: ECONNREFUSED: cannot reach the database',
    });
  });
});

describe('the schema work and the target URL', () => {
  it('creates missing tables and adds missing columns, never drops', () => {
    const { cursors, tables } = sinkTables(['product'], 'p_');
    const products = tables.get('product')!;
    expect(products.name).toBe('p_products');
    const work = schemaWork(new Map([['p_products', new Set(['owner_id', 'id', 'title', 'extra'])]]), [
      cursors,
      products,
    ]);
    expect(work.create.map((item) => item.table.name)).toEqual(['menu_sync_sink_cursors']);
    expect(work.add.map((item) => item.column.name)).toEqual(PRODUCT_COLUMNS.slice(3));
  });

  it('parses and masks URLs', () => {
    expect(parseTableUrl('postgres', 'postgresql://u:p%40ss@db.example:6543/shop?sslmode=verify-full')).toEqual({
      kind: 'postgres',
      host: 'db.example',
      port: 6543,
      user: 'u',
      password: 'p@ss',
      database: 'shop',
      tls: 'verify',
      rootCert: null,
    });
    expect(parseTableUrl('postgres', 'postgres://u@[::1]/')).toMatchObject({
      host: '::1',
      port: 5432,
      database: 'u',
      password: null,
    });
    expect(parseTableUrl('mysql', 'mysql://u:p@h/')).toBe('url must be a mysql://user:password@host:port/database URL');
    expect(parseTableUrl('mysql', 'postgres://u:p@h/db')).toBe(
      'url must be a mysql://user:password@host:port/database URL',
    );
    expect(parseTableUrl('postgres', 'postgres://u:p@h/db?password=x')).toBe(
      'url may only carry sslmode=disable|require|verify-ca|verify-full and sslrootcert=<CA file> as parameters',
    );
    expect(maskTableUrl('postgres://user:s%40cret@host:5432/db')).toBe('postgres://user:***@host:5432/db');
    expect(maskTableUrl('mysql://user@host/db')).toBe('mysql://user@host/db');
  });

  it('reads TLS from the URL as libpq and the MySQL client do: a CA file checks the chain, with verify-full the host too', () => {
    const tls = (kind: 'postgres' | 'mysql', query: string) => {
      const target = parseTableUrl(kind, `${kind}://u:p@127.0.0.1/db?${query}`);
      return typeof target === 'string' ? target : [target.tls, target.rootCert];
    };
    expect(tls('postgres', 'sslmode=verify-ca&sslrootcert=/etc/ca.pem')).toEqual(['verify-ca', '/etc/ca.pem']);
    expect(tls('postgres', 'sslmode=require&sslrootcert=/etc/ca.pem')).toEqual(['verify-ca', '/etc/ca.pem']);
    expect(tls('postgres', 'sslrootcert=/etc/ca.pem')).toEqual(['verify', '/etc/ca.pem']);
    expect(tls('postgres', 'sslmode=verify-full')).toEqual(['verify', null]);
    expect(tls('postgres', 'sslmode=require')).toEqual(['require', null]);
    expect(tls('postgres', 'sslmode=verify-ca')).toBe('sslmode verify-ca needs sslrootcert');
    expect(tls('mysql', 'ssl-mode=VERIFY_IDENTITY&ssl-ca=/etc/ca.pem')).toEqual(['verify', '/etc/ca.pem']);
    expect(tls('mysql', 'ssl-mode=REQUIRED&ssl-ca=/etc/ca.pem')).toEqual(['verify-ca', '/etc/ca.pem']);
    expect(tls('mysql', 'ssl-mode=VERIFY_CA')).toBe('ssl-mode VERIFY_CA needs ssl-ca');
  });
});
