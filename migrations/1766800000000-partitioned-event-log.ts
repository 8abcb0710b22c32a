import { Logger } from '@nestjs/common';
import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Positions per partition made here; the daemon makes the next ones of EVENT_LOG_PARTITION_SIZE. */
const PARTITION = 1_000_000;
/** Rows read per statement of the backfills: each is a short transaction of its own. */
const BACKFILL_CHUNK = 500_000;
const LOCK_TIMEOUT = '500ms';
const LOCK_ATTEMPTS = 60;
const BOUND = 'event_log_position_bound';

/**
 * `event_log` range-partitioned by `position` (docs/scaling.md, The log's partitions):
 * - the table as it was becomes the first partition, `event_log_0`, attached without being read
 *   again: its bound is proved by a `CHECK` constraint added `NOT VALID` and validated while
 *   appends go on, so the swap itself (under `LOCK_TIMEOUT`, retried) only changes the catalogue;
 * - `event_ids` holds every event id with its position, written by the append in its statement
 *   and never archived, since a unique key on `event_log` itself would have to hold `position`;
 * - `event_log_owners` holds each owner's count and span of `occurred_at`, one row per owner per
 *   append (compacted by the daemon), for `GET /api/v1/owners`;
 * - `event_log_extend(ahead, size)` makes partitions of `size` positions (by default the last
 *   one's) until the last bound is beyond the head plus `ahead`, and answers the last bound.
 * Both tables are backfilled from the entries older than every transaction open at the start
 * (event_log_horizon), in chunks, and from the rest under the swap's lock.
 */
export class PartitionedEventLog1766800000000 implements MigrationInterface {
  name = 'PartitionedEventLog1766800000000';
  transaction = false;

  async up(runner: QueryRunner): Promise<void> {
    if (await isPartitioned(runner)) return;
    // The backfills join CTEs the planner guesses at a row (the tail's index range holds thousands
    // when appends went on meanwhile): a nested loop over them is quadratic, under the lock.
    await runner.query(`SET enable_nestloop = off`);
    try {
      await this.partition(runner);
    } finally {
      await runner.query(`RESET enable_nestloop`);
    }
  }

  private async partition(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE IF NOT EXISTS event_ids (
        event_id text PRIMARY KEY,
        position bigint NOT NULL
      )`);
    await runner.query(`
      CREATE TABLE IF NOT EXISTS event_log_owners (
        owner_id text NOT NULL,
        events   bigint NOT NULL,
        first_at timestamptz NOT NULL,
        last_at  timestamptz NOT NULL
      )`);
    await runner.query(`CREATE INDEX IF NOT EXISTS event_log_owners_owner_idx ON event_log_owners (owner_id)`);
    await runner.query(PARTITIONS);
    await runner.query(EXTEND);

    const [{ horizon }] = await runner.query(`SELECT event_log_horizon()::text AS horizon`);
    const [{ head }] = await runner.query(`SELECT coalesce(max(position), 0)::text AS head FROM event_log`);
    for (let from = 0; from <= Number(head); from += BACKFILL_CHUNK) {
      await runner.query(backfill(`e.position >= $2 AND e.position < $3 AND e.transaction_id < $1::xid8`), [
        horizon,
        from,
        from + BACKFILL_CHUNK,
      ]);
    }

    const bound = (Math.floor((Number(head) + PARTITION / 2) / PARTITION) + 1) * PARTITION;
    await withLock(runner, async () => {
      await runner.query(`ALTER TABLE event_log DROP CONSTRAINT IF EXISTS ${BOUND}`);
      await runner.query(`ALTER TABLE event_log ADD CONSTRAINT ${BOUND} CHECK (position < ${bound}) NOT VALID`);
    });
    await runner.query(`ALTER TABLE event_log VALIDATE CONSTRAINT ${BOUND}`);

    let locked = 0n;
    await withLock(runner, async () => {
      await runner.query(`LOCK TABLE event_log IN ACCESS EXCLUSIVE MODE`);
      locked = process.hrtime.bigint();
      await runner.query(backfill(`e.transaction_id >= $1::xid8`), [horizon]);
      await swap(runner, bound);
    });
    const lockHeldMs = Number(process.hrtime.bigint() - locked) / 1e6;
    new Logger('Migrations').log({
      msg: 'event_log partitioned',
      lockHeldMs: Math.round(lockHeldMs),
      entries: Number(head),
    });
  }

  /** Back to one table: every entry is copied (a long lock, unlike `up`). */
  async down(runner: QueryRunner): Promise<void> {
    if (!(await isPartitioned(runner))) return;
    await runner.startTransaction();
    try {
      await runner.query(`
        CREATE TABLE event_log_unpartitioned
          (LIKE event_log INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMPRESSION INCLUDING STORAGE)`);
      await runner.query(`INSERT INTO event_log_unpartitioned SELECT * FROM event_log`);
      const [{ next }] = await runner.query(`SELECT coalesce(max(position), 0) + 1 AS next FROM event_log`);
      const indexes = await indexDefinitions(runner, 'event_log');
      await runner.query(`ALTER TABLE event_log_unpartitioned ALTER COLUMN position DROP DEFAULT`);
      await runner.query(`DROP TABLE event_log, event_ids, event_log_owners`);
      await runner.query(`DROP FUNCTION event_log_extend(bigint, bigint)`);
      await runner.query(`DROP FUNCTION event_log_partitions()`);
      await runner.query(`ALTER TABLE event_log_unpartitioned RENAME TO event_log`);
      await runner.query(`ALTER TABLE event_log ADD PRIMARY KEY (position)`);
      for (const { definition } of indexes.filter((index) => !index.primary)) await runner.query(definition);
      await runner.query(`ALTER TABLE event_log ADD CONSTRAINT event_log_event_id_key UNIQUE (event_id)`);
      await runner.query(
        `ALTER TABLE event_log ALTER COLUMN position ADD GENERATED ALWAYS AS IDENTITY (START WITH ${next})`,
      );
      await runner.query(`
        CREATE TRIGGER event_log_append_only BEFORE UPDATE OR DELETE ON event_log
          FOR EACH ROW EXECUTE FUNCTION event_log_reject_change()`);
      await runner.query(`
        CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON event_log
          FOR EACH STATEMENT EXECUTE FUNCTION event_log_reject_change()`);
      await runner.commitTransaction();
    } catch (error) {
      await runner.rollbackTransaction();
      throw error;
    }
  }
}

/**
 * The catalogue change, under the lock: the old table renamed with its indexes, a partitioned
 * table of the same columns, constraints and indexes (so that attaching finds every index built),
 * the old table attached as the first partition and the next one made.
 */
async function swap(runner: QueryRunner, bound: number): Promise<void> {
  const indexes = await indexDefinitions(runner, 'event_log');
  const checks: Array<{ name: string; definition: string }> = await runner.query(
    `SELECT conname AS name, pg_get_constraintdef(oid) AS definition FROM pg_constraint
      WHERE conrelid = 'event_log'::regclass AND contype = 'c' AND conname <> $1`,
    [BOUND],
  );
  const [sequence] = await runner.query(`SELECT pg_get_serial_sequence('event_log', 'position') AS name`);
  const [{ next }] = await runner.query(
    `SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END AS next FROM ${sequence.name}`,
  );

  await runner.query(`ALTER TABLE event_log RENAME TO event_log_0`);
  await runner.query(`ALTER TABLE event_log_0 DROP CONSTRAINT event_log_event_id_key`);
  await runner.query(`DROP TRIGGER event_log_append_only ON event_log_0`);
  await runner.query(`ALTER TABLE event_log_0 ALTER COLUMN position DROP IDENTITY`);
  for (const index of indexes) {
    if (index.name === 'event_log_event_id_key') continue;
    await runner.query(`ALTER INDEX ${index.name} RENAME TO ${index.name.replace(/^event_log_/, 'event_log_0_')}`);
  }

  await runner.query(`CREATE SEQUENCE event_log_position_seq AS bigint START WITH ${next}`);
  await runner.query(`
    CREATE TABLE event_log (LIKE event_log_0 INCLUDING DEFAULTS INCLUDING COMPRESSION INCLUDING STORAGE)
      PARTITION BY RANGE (position)`);
  await runner.query(`ALTER TABLE event_log ALTER COLUMN position SET DEFAULT nextval('event_log_position_seq')`);
  await runner.query(`ALTER SEQUENCE event_log_position_seq OWNED BY event_log.position`);
  for (const check of checks)
    await runner.query(`ALTER TABLE event_log ADD CONSTRAINT ${check.name} ${check.definition}`);
  await runner.query(`ALTER TABLE event_log ADD CONSTRAINT event_log_pkey PRIMARY KEY (position)`);
  for (const index of indexes) if (!index.primary && !index.unique) await runner.query(index.definition);

  await runner.query(`ALTER TABLE event_log ATTACH PARTITION event_log_0 FOR VALUES FROM (MINVALUE) TO (${bound})`);
  await runner.query(`
    CREATE TRIGGER event_log_append_only BEFORE UPDATE OR DELETE ON event_log
      FOR EACH ROW EXECUTE FUNCTION event_log_reject_change()`);
  await runner.query(`
    CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON event_log
      FOR EACH STATEMENT EXECUTE FUNCTION event_log_reject_change()`);
  await runner.query(`SELECT event_log_extend(${PARTITION}, ${PARTITION})`);
}

interface IndexDefinition {
  name: string;
  definition: string;
  primary: boolean;
  unique: boolean;
}

async function indexDefinitions(runner: QueryRunner, table: string): Promise<IndexDefinition[]> {
  return runner.query(
    `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition, i.indisprimary AS primary, i.indisunique AS unique
       FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE i.indrelid = $1::regclass ORDER BY c.relname`,
    [table],
  );
}

async function isPartitioned(runner: QueryRunner): Promise<boolean> {
  const [row] = await runner.query(`SELECT relkind FROM pg_class WHERE oid = 'event_log'::regclass`);
  return row.relkind === 'p';
}

/** Event ids and owners' counts of the entries `where` selects that `event_ids` lacks. */
function backfill(where: string): string {
  return `
    WITH entries AS MATERIALIZED (
           SELECT e.event_id, e.position, e.owner_id, e.occurred_at FROM event_log e WHERE ${where}),
         ids AS (
           INSERT INTO event_ids (event_id, position) SELECT event_id, position FROM entries
           ON CONFLICT (event_id) DO NOTHING RETURNING event_id)
    INSERT INTO event_log_owners (owner_id, events, first_at, last_at)
    SELECT owner_id, count(*), min(occurred_at), max(occurred_at) FROM entries JOIN ids USING (event_id)
     WHERE owner_id IS NOT NULL GROUP BY owner_id`;
}

/** Runs `work` in a transaction that waits at most LOCK_TIMEOUT for each lock, tried again on a timeout. */
async function withLock(runner: QueryRunner, work: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    await runner.startTransaction();
    try {
      await runner.query(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
      await work();
      await runner.commitTransaction();
      return;
    } catch (error) {
      await runner.rollbackTransaction();
      if ((error as { code?: string }).code !== '55P03' || attempt === LOCK_ATTEMPTS) throw error;
    }
  }
}

const PARTITIONS = `
  CREATE OR REPLACE FUNCTION event_log_partitions() RETURNS TABLE (partition regclass, lower bigint, upper bigint)
  LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass,
           substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \\(''?(-?[0-9]+)')::bigint,
           substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \\(''?(-?[0-9]+)')::bigint
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'event_log'::regclass
     ORDER BY 3
  $$`;

const EXTEND = `
  CREATE OR REPLACE FUNCTION event_log_extend(ahead bigint, size bigint DEFAULT NULL) RETURNS bigint
  -- As the log's owner (docs/reference.md §13, least privilege): the daemon's role may append to
  -- the log, not own it, and attaching a partition takes the parent's owner.
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
  DECLARE
    head bigint;
    last_bound bigint;
    step bigint;
    name text;
  BEGIN
    -- Self-exclusive, and taken by ATTACH anyway: two callers make each partition once; appends go on.
    LOCK TABLE event_log IN SHARE UPDATE EXCLUSIVE MODE;
    SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO head FROM event_log_position_seq;
    SELECT p.upper, p.upper - coalesce(p.lower, 0) INTO last_bound, step
      FROM event_log_partitions() p ORDER BY p.upper DESC LIMIT 1;
    step := coalesce(size, step);
    WHILE last_bound <= head + ahead LOOP
      name := format('event_log_%s', last_bound);
      EXECUTE format('CREATE TABLE %I (LIKE event_log INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMPRESSION INCLUDING STORAGE)', name);
      EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (position >= %s AND position < %s)',
                     name, name || '_bound', last_bound, last_bound + step);
      EXECUTE format('CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON %I
                        FOR EACH STATEMENT EXECUTE FUNCTION event_log_reject_change()', name);
      EXECUTE format('ALTER TABLE event_log ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)',
                     name, last_bound, last_bound + step);
      last_bound := last_bound + step;
    END LOOP;
    RETURN last_bound;
  END $$`;
