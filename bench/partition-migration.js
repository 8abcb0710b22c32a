// The migration to a partitioned event log on an unpartitioned log of --entries entries (10M by
// default), 80 % order events, with every index the log had: how long it held the lock that
// appends wait on (the swap), its whole duration, and the slowest of the single-row INSERTs a
// writer ran every 5 ms meanwhile. Runs from dist/ (`npm run build` first); its database is
// dropped at the end. `node bench/partition-migration.js [--entries=10000000] [--keep]`
import pg from 'pg';
import { DataSource } from 'typeorm';
import { MIGRATIONS } from '../dist/migrations/index.js';
import { dataSourceOptions } from '../dist/src/database/data-source.factory.js';

const arg = (name, fallback) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback;
const ENTRIES = Number(arg('entries', 10_000_000));
const CHUNK = 1_000_000;
const ADMIN = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const NAME = `menu_sync_bench_${process.pid}_partition`;
const URL_ = Object.assign(new URL(ADMIN), { pathname: `/${NAME}` }).toString();
const PARTITIONING = MIGRATIONS.findIndex((m) => m.name === 'PartitionedEventLog1766800000000');

async function admin(sql) {
  const client = new pg.Client({ connectionString: ADMIN });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

const seconds = (since) => Math.round((performance.now() - since) / 100) / 10;

await admin(`CREATE DATABASE ${NAME} ENCODING 'UTF8' TEMPLATE template0`);
try {
  const earlier = new DataSource({
    ...dataSourceOptions({ url: URL_, poolSize: 2 }),
    migrations: MIGRATIONS.slice(0, PARTITIONING),
  });
  await earlier.initialize();
  await earlier.runMigrations({ transaction: 'each' });
  // Indexes are built after the fill (faster than kept up row by row), as they were when the log grew.
  const indexes = await earlier.query(
    `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition FROM pg_index i
       JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'event_log'::regclass AND NOT i.indisprimary AND NOT i.indisunique`,
  );
  for (const { name } of indexes) await earlier.query(`DROP INDEX ${name}`);
  await earlier.query(`SET synchronous_commit = off`);
  const filling = performance.now();
  for (let lo = 1; lo <= ENTRIES; lo += CHUNK) {
    const hi = Math.min(ENTRIES, lo + CHUNK - 1);
    await earlier.query(
      `INSERT INTO event_log (event_id, event_type, subject_type, subject_id, owner_id, occurred_at, event_seq, source,
                              handled, received_at, payload, sha256)
       SELECT md5('partition-bench-' || i)::uuid::text, t, split_part(t, '.', 1), (i % 5000)::text, (i % 100)::text,
              timestamptz '2026-01-01' + i * interval '3 seconds', i, 'webhook', true,
              timestamptz '2026-01-01' + i * interval '3 seconds', json_build_object('i', i, 'type', t), sha256(int8send(i))
         FROM (SELECT i, CASE WHEN i % 10 < 8 THEN 'order.updated' ELSE 'product.updated' END AS t
                 FROM generate_series($1::bigint, $2::bigint) AS i) AS g`,
      [lo, hi],
    );
    process.stderr.write(`\r  fill: ${hi} / ${ENTRIES}, ${seconds(filling)} s`);
  }
  process.stderr.write('\n');
  for (const { definition } of indexes) await earlier.query(definition);
  await earlier.query(`VACUUM (ANALYZE) event_log`);
  await earlier.query(`CHECKPOINT`);
  await earlier.destroy();
  console.log(`filled ${ENTRIES} entries and built ${indexes.length} indexes in ${seconds(filling)} s`);

  // A writer beside the migration, as a daemon of the old version appends (a plain INSERT works on both).
  const writer = new pg.Client({ connectionString: URL_ });
  await writer.connect();
  const writes = { n: 0, failed: 0, slowestMs: 0, errors: new Set() };
  let writing = true;
  const writerLoop = (async () => {
    for (let k = 0; writing; k++) {
      const started = performance.now();
      try {
        await writer.query(
          `INSERT INTO event_log (event_id, event_type, subject_type, subject_id, owner_id, occurred_at, source, handled,
                                  received_at, payload, sha256)
           VALUES ($1, 'product.updated', 'product', '1', '1', now(), 'webhook', true, now(), '{}', '\\x00')`,
          [`writer-${process.pid}-${k}`],
        );
        writes.n++;
      } catch (error) {
        writes.failed++;
        writes.errors.add(error.message);
      }
      writes.slowestMs = Math.max(writes.slowestMs, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();

  const logged = [];
  const log = console.log;
  const migrating = performance.now();
  const dataSource = new DataSource(dataSourceOptions({ url: URL_, poolSize: 2 }));
  await dataSource.initialize();
  process.stdout.write = (
    (write) =>
    (chunk, ...rest) => {
      if (String(chunk).includes('event_log partitioned')) logged.push(String(chunk).trim());
      return write.call(process.stdout, chunk, ...rest);
    }
  )(process.stdout.write);
  await dataSource.runMigrations({ transaction: 'each' });
  const migrationSeconds = seconds(migrating);
  writing = false;
  await writerLoop;
  await writer.end();
  const [{ n }] = await dataSource.query(`SELECT count(*)::bigint AS n FROM event_log`);
  const [{ ids }] = await dataSource.query(`SELECT count(*)::bigint AS ids FROM event_ids`);
  await dataSource.destroy();
  log(`migration: ${migrationSeconds} s in all; ${logged.join(' ')}`);
  log(`writer beside it: ${writes.n} inserts, ${writes.failed} failed, slowest ${Math.round(writes.slowestMs)} ms`);
  if (writes.errors.size > 0) log(`  errors: ${[...writes.errors].join('; ')}`);
  log(`after: ${n} entries in event_log, ${ids} in event_ids`);
} finally {
  if (!process.argv.includes('--keep')) await admin(`DROP DATABASE IF EXISTS ${NAME} WITH (FORCE)`);
}
