import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource, useDatabase } from '../../test/support/database.js';
import { catchUp } from '../../test/support/projection.js';
import { allEntries, anEvent, expected, logEntry, readModel } from '../../test/support/projection-property.js';
import { fold } from '../domain/evolve.js';
import type { WebhookEvent } from '../domain/webhook-event.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import { toWebhookEvent } from '../projection/from-log-entry.js';
import { MENU_PROJECTION, PROJECTIONS } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { ProjectionStatusRepository } from '../projection/projection-status.repository.js';
import { CHECKPOINTS_KEPT, CheckpointRepository, SavedCheckpoint } from './checkpoint.repository.js';
import { RebuildService } from './rebuild.service.js';
import { ShadowSchemaRepository } from './shadow-schema.repository.js';

const rebuildOn = (dataSource: DataSource) =>
  new RebuildService(
    dataSource,
    new ProjectionRepository(),
    new ProjectionStatusRepository(dataSource),
    new ShadowSchemaRepository(),
  );

/** Appends `entries` in batches of `batchSize` and projects them all; answers how many the log holds. */
async function appendAndProject(
  dataSource: DataSource,
  entries: ReturnType<typeof logEntry>[],
  batchSize: number,
  pageSize: number,
): Promise<number> {
  const log = new EventLogRepository(dataSource);
  for (let i = 0; i < entries.length; i += batchSize) await log.append(entries.slice(i, i + batchSize));
  const total = (await allEntries(log)).length;
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    const projections = new ProjectionRepository();
    await projections.prepareLane(runner);
    await catchUp(projections, runner, PROJECTIONS, pageSize, total);
  } finally {
    await runner.release();
  }
  return total;
}

describe('projection checkpoints (PostgreSQL)', () => {
  it('a rebuild from a checkpoint taken anywhere in a random log equals the fold of every event, and verify from it finds nothing', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(anEvent, { minLength: 2, maxLength: 80 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 1, max: 20 }),
        async (specs, split, pageSize, batchSize) => {
          const database = await createTestDatabase();
          const dataSource = await openDataSource(database.url, 4);
          try {
            const entries = specs.map(logEntry);
            const cut = Math.floor(split * entries.length);
            const before = await appendAndProject(dataSource, entries.slice(0, cut), batchSize, pageSize);
            const runner = dataSource.createQueryRunner();
            await runner.connect();
            const saved = new Map<string, SavedCheckpoint>();
            try {
              for (const projection of PROJECTIONS) {
                const checkpoint = await new CheckpointRepository().take(runner, projection);
                const [live] = await runner.query(
                  `SELECT position::text AS position FROM ${projection.schema}.checkpoint`,
                );
                expect(checkpoint.at.position).toBe(live.position);
                saved.set(projection.name, checkpoint);
              }
            } finally {
              await runner.release();
            }
            const total = await appendAndProject(dataSource, entries.slice(cut), batchSize, pageSize);
            expect(total).toBeGreaterThanOrEqual(before);

            const rebuild = rebuildOn(dataSource);
            for (const projection of PROJECTIONS) {
              const from = saved.get(projection.name)!;
              expect((await rebuild.verify(projection, undefined, from)).count).toBe(0);
              const report = await rebuild.replay(projection, undefined, from);
              expect({ from: report.from?.at.position, applied: report.applied }).toEqual({
                from: from.at.position,
                applied: total - before,
              });
            }
            const missing = new Set(specs.filter((spec) => spec.missing).map((spec) => spec.eventId));
            const events = (await allEntries(new EventLogRepository(dataSource)))
              .map(toWebhookEvent)
              .filter((event): event is WebhookEvent => event !== null && !missing.has(event.eventId));
            expect(new Map([...(await readModel(dataSource))].sort())).toEqual(
              new Map([...expected(fold(events))].sort()),
            );
          } finally {
            await dataSource.destroy();
            await database.drop();
          }
        },
      ),
      { numRuns: 10, endOnFailure: true },
    );
  }, 300_000);

  describe('kept and read', () => {
    const db = useDatabase(4);
    const product = (id: string, title: string) =>
      logEntry({
        eventType: 'product.created',
        subjectType: 'product',
        subjectId: id,
        createdAt: '2024-01-01T00:00:00.000Z',
        seq: 1,
        eventId: `product-${id}-${title}`,
        title,
      });

    it('one checkpoint per position, the newest kept, each a copy of the tables at its position', async () => {
      const checkpoints = new CheckpointRepository();
      const runner = db.dataSource.createQueryRunner();
      await runner.connect();
      try {
        const positions: string[] = [];
        for (const id of ['1', '2', '3']) {
          await appendAndProject(db.dataSource, [product(id, 'a')], 1, 10);
          const first = await checkpoints.take(runner, MENU_PROJECTION);
          expect((await checkpoints.take(runner, MENU_PROJECTION)).id).toBe(first.id);
          positions.push(first.at.position);
        }
        const kept = await checkpoints.list(runner, MENU_PROJECTION);
        expect(kept.map((checkpoint) => checkpoint.at.position)).toEqual(positions.slice(-CHECKPOINTS_KEPT).reverse());
        expect(kept.map((checkpoint) => checkpoint.schema)).toEqual(
          positions
            .slice(-CHECKPOINTS_KEPT)
            .reverse()
            .map((position) => `proj_menu__ckpt_${position}`),
        );
        const [{ n }] = await runner.query(
          `SELECT count(*)::int AS n FROM pg_namespace WHERE nspname LIKE 'proj\\_menu\\_\\_ckpt\\_%'`,
        );
        expect(n).toBe(CHECKPOINTS_KEPT);
        const ids = await runner.query(`SELECT id FROM ${kept[1].schema}.products ORDER BY id`);
        expect(ids.map((row: { id: string }) => row.id)).toEqual(['1', '2']);
        expect(kept[0]).toMatchObject({ projection: 'menu', rows: expect.any(Number) });
        // checkpoint row + owner_versions rows (one owner) + 3 products
        expect(kept[0].rows).toBe(1 + 1 + 3);
        expect(
          (await checkpoints.newest(runner, MENU_PROJECTION, { transactionId: '0', position: '0' })) === null,
        ).toBe(true);
        expect((await checkpoints.newest(runner, MENU_PROJECTION))!.at.position).toBe(positions[2]);
      } finally {
        await runner.release();
      }
    });

    it('verify from a checkpoint still finds drift of the live model', async () => {
      await appendAndProject(db.dataSource, [product('4', 'b')], 1, 10);
      const runner = db.dataSource.createQueryRunner();
      await runner.connect();
      const from = await new CheckpointRepository().take(runner, MENU_PROJECTION).finally(() => runner.release());
      await db.dataSource.query(`UPDATE proj_menu.products SET attributes = '{"title":"drifted"}' WHERE id = '4'`);
      const report = await rebuildOn(db.dataSource).verify(MENU_PROJECTION, undefined, from);
      expect(report.differences).toEqual([{ type: 'product', id: '4', fields: ['attributes'] }]);
    });
  });
});
