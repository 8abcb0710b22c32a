import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The event log's archive (docs/reference.md §8, The archive): one row per closed partition
 * exported to ARCHIVE_DIR, with what its manifest entry says. A partition is `exported` once its
 * file was written, read back and found equal to it; `archived` once it was detached and dropped
 * (in the same transaction as this row's change); `restored` once it was attached again from its
 * file. The archive horizon is the highest `upper_bound` of the `archived` rows: a position below
 * it is in the archive unless a `restored` row's range holds it. One row per partition (its
 * `lower_bound`; the first partition's MINVALUE is kept as 0).
 *
 * An archive file holds one line per entry, made by `event_log_archive_lines` (so the file, the
 * digest computed here and a restored partition agree to the byte): the entry's every column as
 * JSON, `payload` as a JSON string of its exact text, `bytea` in hex, instants in UTC.
 * `rows_sha256` is the SHA-256 of the SHA-256 of each line, in position order; `events_sha256`
 * that of the entries' own `sha256` column. The daemon's role does not own `event_log`
 * (reference §13, least privilege): detaching, dropping, re-creating and attaching a partition
 * go through the functions below, as the log's owner, and refuse a partition whose row does
 * not match it.
 */
export class EventLogArchive1767000000000 implements MigrationInterface {
  name = 'EventLogArchive1767000000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE event_log_archives (
        id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        partition_name    text NOT NULL,
        lower_bound       bigint NOT NULL,
        upper_bound       bigint NOT NULL,
        first_position    bigint,
        last_position     bigint,
        events            bigint NOT NULL,
        first_occurred_at timestamptz,
        last_occurred_at  timestamptz,
        first_received_at timestamptz,
        last_received_at  timestamptz,
        file              text NOT NULL,
        bytes             bigint NOT NULL,
        sha256            text NOT NULL,
        events_sha256     text NOT NULL,
        checkpoint_position bigint,
        state             text NOT NULL,
        created_at        timestamptz NOT NULL DEFAULT now(),
        archived_at       timestamptz,
        restored_at       timestamptz,
        rows_sha256       text NOT NULL,
        checkpoints       jsonb NOT NULL DEFAULT '{}',
        CONSTRAINT event_log_archives_state_check CHECK (state IN ('exported', 'archived', 'restored')),
        CONSTRAINT event_log_archives_bounds_check CHECK (lower_bound < upper_bound)
      )`);
    await runner.query(`CREATE INDEX event_log_archives_bounds_idx ON event_log_archives (upper_bound)`);
    await runner.query(`CREATE UNIQUE INDEX event_log_archives_lower_idx ON event_log_archives (lower_bound)`);
    for (const statement of ARCHIVE_FUNCTIONS) await runner.query(statement);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query(`DROP FUNCTION event_log_archive_entries(json)`);
    await runner.query(`DROP FUNCTION event_log_archive_attach(bigint)`);
    await runner.query(`DROP FUNCTION event_log_archive_load(bigint, json)`);
    await runner.query(`DROP FUNCTION event_log_archive_discard(bigint)`);
    await runner.query(`DROP FUNCTION event_log_archive_create(bigint)`);
    await runner.query(`DROP FUNCTION event_log_archive_detach(bigint)`);
    await runner.query(`DROP FUNCTION event_log_archive_digest(regclass)`);
    await runner.query(`DROP FUNCTION event_log_archive_lines(regclass, bigint, integer)`);
    await runner.query(`DROP TABLE event_log_archives`);
  }
}

/** The columns of a line, in order, and their types for `json_to_recordset` (a restore). */
const COLUMNS = `position bigint, transaction_id xid8, event_id text, event_type text, subject_type text,
  subject_id text, owner_id text, occurred_at timestamptz, event_seq numeric, source text, handled boolean,
  received_at timestamptz, key_id text, content_type text, payload text, raw_body bytea, raw_sealed boolean,
  raw_key bytea, raw_key_at integer[], sha256 bytea`;
const NAMES = COLUMNS.split(',')
  .map((column) => column.trim().split(/\s+/)[0])
  .join(', ');
/** Refuses a table that is neither a partition of the log nor one an archive row names. */
const OWN_TABLE = `
     IF NOT EXISTS (SELECT 1 FROM event_log_partitions() p WHERE p.partition = part)
        AND NOT EXISTS (SELECT 1 FROM event_log_archives a WHERE a.partition_name = part::text) THEN
       RAISE EXCEPTION '% is not a partition of event_log', part USING ERRCODE = 'insufficient_privilege';
     END IF;`;
const LINE = `json_build_object(${NAMES.split(', ')
  .map((name) => `'${name}', ${name === 'payload' ? 'e.payload::text' : `e.${name}`}`)
  .join(', ')})::text`;

const ARCHIVE_FUNCTIONS = [
  // Lines back into entries, for a replay from the archive (`replay --from-archive`).
  `CREATE FUNCTION event_log_archive_entries(lines json) RETURNS SETOF event_log
   LANGUAGE sql STABLE SET TimeZone = 'UTC' AS $$
     SELECT ${NAMES.replace('payload', 'payload::json')} FROM json_to_recordset(lines) AS x(${COLUMNS})
   $$`,
  `CREATE FUNCTION event_log_archive_lines(part regclass, after bigint, page integer)
     RETURNS TABLE (entry_position bigint, line text)
   LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET TimeZone = 'UTC' SET bytea_output = 'hex' AS $$
   BEGIN${OWN_TABLE}
     RETURN QUERY EXECUTE format('SELECT e.position, ${LINE.replace(/'/g, "''")} FROM %s e WHERE e.position > $1 ORDER BY e.position LIMIT $2', part)
       USING after, page;
   END $$`,
  `CREATE FUNCTION event_log_archive_digest(part regclass)
     RETURNS TABLE (events bigint, first_position bigint, last_position bigint, events_sha256 text, rows_sha256 text,
                    first_occurred_at timestamptz, last_occurred_at timestamptz, first_received_at timestamptz,
                    last_received_at timestamptz, last_transaction_id xid8)
   LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp SET TimeZone = 'UTC' SET bytea_output = 'hex' AS $$
   BEGIN${OWN_TABLE}
     RETURN QUERY EXECUTE format('SELECT count(*), min(e.position), max(e.position),
              encode(sha256(coalesce(string_agg(e.sha256, ''''::bytea ORDER BY e.position), ''''::bytea)), ''hex''),
              encode(sha256(coalesce(string_agg(sha256(convert_to(${LINE.replace(/'/g, "''")}, ''UTF8'')), ''''::bytea ORDER BY e.position), ''''::bytea)), ''hex''),
              min(e.occurred_at), max(e.occurred_at), min(e.received_at), max(e.received_at), max(e.transaction_id)
         FROM %s e', part);
   END $$`,
  // Detached and dropped only as the row says it was exported: same partition, same count.
  `CREATE FUNCTION event_log_archive_detach(archive bigint) RETURNS void
   LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
   DECLARE
     archived event_log_archives;
     found bigint;
   BEGIN
     SELECT * INTO archived FROM event_log_archives WHERE id = archive FOR UPDATE;
     IF archived.id IS NULL OR archived.state <> 'exported' THEN
       RAISE EXCEPTION 'archive % is not exported', archive USING ERRCODE = 'object_not_in_prerequisite_state';
     END IF;
     IF NOT EXISTS (SELECT 1 FROM event_log_partitions() p
                     WHERE p.partition::text = archived.partition_name AND p.upper = archived.upper_bound
                       AND p.upper < (SELECT max(q.upper) FROM event_log_partitions() q)) THEN
       RAISE EXCEPTION '% is not a closed partition of event_log', archived.partition_name USING ERRCODE = 'object_not_in_prerequisite_state';
     END IF;
     LOCK TABLE event_log IN ACCESS EXCLUSIVE MODE;
     EXECUTE format('SELECT count(*) FROM %I', archived.partition_name) INTO found;
     IF found <> archived.events THEN
       RAISE EXCEPTION '% holds % entries, its archive %', archived.partition_name, found, archived.events USING ERRCODE = 'data_exception';
     END IF;
     EXECUTE format('ALTER TABLE event_log DETACH PARTITION %I', archived.partition_name);
     EXECUTE format('DROP TABLE %I', archived.partition_name);
     UPDATE event_log_archives SET state = 'archived', archived_at = now() WHERE id = archive;
   END $$`,
  // A restore's table, empty, not attached: made anew when an interrupted restore left one.
  `CREATE FUNCTION event_log_archive_create(archive bigint) RETURNS void
   LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
   DECLARE
     archived event_log_archives;
   BEGIN
     SELECT * INTO archived FROM event_log_archives WHERE id = archive FOR UPDATE;
     IF archived.id IS NULL OR archived.state <> 'archived' THEN
       RAISE EXCEPTION 'archive % is not archived', archive USING ERRCODE = 'object_not_in_prerequisite_state';
     END IF;
     IF EXISTS (SELECT 1 FROM event_log_partitions() p WHERE p.partition::text = archived.partition_name) THEN
       RAISE EXCEPTION '% is attached', archived.partition_name USING ERRCODE = 'object_not_in_prerequisite_state';
     END IF;
     EXECUTE format('DROP TABLE IF EXISTS %I', archived.partition_name);
     EXECUTE format('CREATE TABLE %I (LIKE event_log INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMPRESSION INCLUDING STORAGE)', archived.partition_name);
     EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (position >= %s AND position < %s)',
                    archived.partition_name, archived.partition_name || '_bound', archived.lower_bound, archived.upper_bound);
     EXECUTE format('CREATE TRIGGER event_log_no_truncate BEFORE TRUNCATE ON %I
                       FOR EACH STATEMENT EXECUTE FUNCTION event_log_reject_change()', archived.partition_name);
   END $$`,
  // A failed restore's table dropped again (never an attached partition).
  `CREATE FUNCTION event_log_archive_discard(archive bigint) RETURNS void
   LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
   DECLARE
     archived event_log_archives;
   BEGIN
     SELECT * INTO archived FROM event_log_archives WHERE id = archive;
     IF archived.id IS NULL OR archived.state <> 'archived'
        OR EXISTS (SELECT 1 FROM event_log_partitions() p WHERE p.partition::text = archived.partition_name) THEN
       RAISE EXCEPTION 'archive % is not being restored', archive USING ERRCODE = 'object_not_in_prerequisite_state';
     END IF;
     EXECUTE format('DROP TABLE IF EXISTS %I', archived.partition_name);
   END $$`,
  `CREATE FUNCTION event_log_archive_load(archive bigint, lines json) RETURNS bigint
   LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp SET TimeZone = 'UTC' AS $$
   DECLARE
     archived event_log_archives;
     loaded bigint;
   BEGIN
     SELECT * INTO archived FROM event_log_archives WHERE id = archive;
     IF archived.id IS NULL OR archived.state <> 'archived'
        OR EXISTS (SELECT 1 FROM event_log_partitions() p WHERE p.partition::text = archived.partition_name) THEN
       RAISE EXCEPTION 'archive % is not being restored', archive USING ERRCODE = 'object_not_in_prerequisite_state';
     END IF;
     EXECUTE format('INSERT INTO %I (${NAMES}) SELECT ${NAMES.replace('payload', 'payload::json')} FROM json_to_recordset($1) AS x(${COLUMNS})', archived.partition_name)
       USING lines;
     GET DIAGNOSTICS loaded = ROW_COUNT;
     RETURN loaded;
   END $$`,
  // Attached only when the table holds exactly the archived entries (count and both digests).
  `CREATE FUNCTION event_log_archive_attach(archive bigint) RETURNS void
   LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
   DECLARE
     archived event_log_archives;
     digest record;
   BEGIN
     SELECT * INTO archived FROM event_log_archives WHERE id = archive FOR UPDATE;
     IF archived.id IS NULL OR archived.state <> 'archived' THEN
       RAISE EXCEPTION 'archive % is not archived', archive USING ERRCODE = 'object_not_in_prerequisite_state';
     END IF;
     SELECT * INTO digest FROM event_log_archive_digest(archived.partition_name::regclass);
     IF digest.events <> archived.events OR digest.events_sha256 <> archived.events_sha256 OR digest.rows_sha256 <> archived.rows_sha256 THEN
       RAISE EXCEPTION '% differs from its archive %', archived.partition_name, archived.file USING ERRCODE = 'data_exception';
     END IF;
     EXECUTE format('ALTER TABLE event_log ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)',
                    archived.partition_name, archived.lower_bound, archived.upper_bound);
     UPDATE event_log_archives SET state = 'restored', restored_at = now() WHERE id = archive;
   END $$`,
];
