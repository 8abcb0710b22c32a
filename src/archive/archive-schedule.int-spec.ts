import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { useDatabase } from '../../test/support/database.js';
import { newLogEntry } from '../../test/support/event-log.js';
import { catchUp } from '../../test/support/projection.js';
import { AuditLog } from '../audit/audit-log.service.js';
import { AuditRepository } from '../audit/audit.repository.js';
import { loadConfig } from '../config/app-config.js';
import { advisoryLocks, lockQuery } from '../database/advisory-locks.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import { PROJECTIONS } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { ArchiveScheduleService } from './archive-schedule.service.js';
import { ArchiveService } from './archive.service.js';

const FIRST = 2_000_000;
const OLD = new Date('2024-01-01T00:00:00.000Z');

describe('ARCHIVE_AFTER (PostgreSQL)', () => {
  const db = useDatabase(4);
  let directory: string;

  beforeAll(async () => {
    directory = await mkdtemp(path.join(tmpdir(), 'menu-sync-archive-schedule-'));
    await db.dataSource.query(`SELECT setval('event_log_position_seq', ${FIRST - 1})`);
    await db.dataSource.query(`SELECT event_log_extend(4000, 1000)`);
    // Two partitions received long ago, then one received now, then the head's.
    const entries = Array.from({ length: 3500 }, (_, i) => ({
      ...newLogEntry({
        eventId: `schedule-${i}`,
        eventType: 'product.updated',
        subjectId: String(i % 40),
        occurredAt: OLD.toISOString(),
        seq: i,
      }),
      ...(i < 2000 ? { receivedAt: new Date(OLD.getTime() + i * 1000) } : {}),
    }));
    await new EventLogRepository(db.dataSource).append(entries);
    const runner = db.dataSource.createQueryRunner();
    await runner.connect();
    try {
      const projections = new ProjectionRepository();
      await projections.prepareLane(runner);
      await catchUp(projections, runner, PROJECTIONS, 1000, entries.length);
    } finally {
      await runner.release();
    }
  });
  afterAll(() => rm(directory, { recursive: true, force: true }));

  it('a run finding another in progress leaves the work to it', async () => {
    const holder = db.dataSource.createQueryRunner();
    await holder.connect();
    try {
      await holder.query(...lockQuery('pg_advisory_lock', advisoryLocks.single('archive')));
      await expect(new ArchiveService(db.dataSource, directory).archive({ position: FIRST + 2000 })).rejects.toThrow(
        'another archive run is in progress',
      );
    } finally {
      await holder.query(...lockQuery('pg_advisory_unlock', advisoryLocks.single('archive')));
      await holder.release();
    }
    const [{ n }] = await db.dataSource.query(`SELECT count(*)::int AS n FROM event_log_archives`);
    expect(n).toBe(0);
  });

  it('archives the closed partitions whose newest entry is older than ARCHIVE_AFTER, and audits each', async () => {
    const config = loadConfig({
      DATABASE_URL: db.url,
      TOKEN_ENCRYPTION_KEY: 'A'.repeat(43) + '=',
      ARCHIVE_AFTER: '90d',
      ARCHIVE_DIR: directory,
      ROLES: 'ingress',
    });
    expect(config.archiveAfterMs).toBe(90 * 86_400_000);
    const audit = new AuditLog(new AuditRepository(db.dataSource), config);
    await new ArchiveScheduleService(db.dataSource, config, audit).run();

    const rows = await db.dataSource.query(
      `SELECT partition_name, state, events::int AS events FROM event_log_archives ORDER BY lower_bound`,
    );
    expect(rows).toEqual([
      { partition_name: 'event_log_0', state: 'archived', events: 0 },
      { partition_name: 'event_log_1000000', state: 'archived', events: 0 },
      { partition_name: 'event_log_2000000', state: 'archived', events: 1000 },
      { partition_name: 'event_log_2001000', state: 'archived', events: 1000 },
    ]);
    const audited = await db.dataSource.query(
      `SELECT actor_id, target FROM audit_log WHERE action = 'event_log.archived' ORDER BY id`,
    );
    expect(audited.map((row: { target: string }) => row.target)).toEqual(
      rows.map((row: { partition_name: string }) => row.partition_name),
    );
    expect(audited[0].actor_id).toBe('daemon:archive');

    // Restored for an investigation, a partition stays attached through the next scheduled runs.
    await new ArchiveService(db.dataSource, directory).restore(FIRST, FIRST);
    await new ArchiveScheduleService(db.dataSource, config, audit).run();
    const states = await db.dataSource.query(`SELECT state FROM event_log_archives ORDER BY lower_bound`);
    expect(states.map((row: { state: string }) => row.state)).toEqual(['archived', 'archived', 'restored', 'archived']);
    const [{ n }] = await db.dataSource.query(
      `SELECT count(*)::int AS n FROM event_log WHERE position >= $1 AND position < $2`,
      [FIRST, FIRST + 1000],
    );
    expect(n).toBe(1000);
  });
});
