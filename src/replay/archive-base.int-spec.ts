import fc from 'fast-check';
import { archivePartition } from '../../test/support/archived-partition.js';
import { createTestDatabase, openDataSource } from '../../test/support/database.js';
import { catchUp } from '../../test/support/projection.js';
import { allEntries, anEvent, logEntry, Spec } from '../../test/support/projection-property.js';
import { fold } from '../domain/evolve.js';
import type { WebhookEvent } from '../domain/webhook-event.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import { toWebhookEvent } from '../projection/from-log-entry.js';
import { PROJECTIONS } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { RESOURCE_TABLES } from '../projection/resource-tables.js';
import { ReadModelRepository } from '../query/read-model.repository.js';
import { ArchiveBaseRepository } from './archive-base.repository.js';

const PARTITION = 1_000_000;
const MENU_TYPES = ['collection', 'product', 'trait', 'trait_option'] as const;
const ORDER_TYPES = ['order', 'order_product', 'order_product_trait_option', 'store'] as const;
const LATER = '2024-02-01T00:00:00.000Z';

/** A create/update without its subject gets an id of its own, so it always wins its page and is always parked. */
const own = (spec: Spec): Spec => (spec.missing ? { ...spec, subjectId: `m${spec.eventId.slice(0, 8)}` } : spec);

/** Every `as_of` answer the property compares: each type's rows (deleted ones too), menu resources as JSON texts. */
async function answers(rows: ReadModelRepository, asOf: Date, archiveBase: boolean): Promise<Record<string, unknown>> {
  const found: Record<string, unknown> = {};
  for (const type of [...MENU_TYPES, ...ORDER_TYPES]) {
    const table = RESOURCE_TABLES[type];
    found[type] = await rows.find(table, { includeDeleted: true, asOf, archiveBase });
    for (const id of ['1', '2', '10'])
      found[`${type} ${id}`] = await rows.find(table, { ids: [id], includeDeleted: true, asOf, archiveBase });
  }
  for (const type of MENU_TYPES) {
    found[`${type} docs`] = await rows.findDocsAsOf(RESOURCE_TABLES[type], { asOf, archiveBase });
    found[`${type} page`] = await rows.find(RESOURCE_TABLES[type], { asOf, archiveBase, limit: 2, afterSortKey: '0' });
  }
  return found;
}

describe('the archive base (PostgreSQL)', () => {
  it('as_of at or after the horizon answers, once a prefix of partitions is folded and dropped, the fold of the whole log', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(anEvent, { maxLength: 25 }), { minLength: 2, maxLength: 4 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 12 }),
        async (segments, wanted, pageSize) => {
          const archived = Math.min(wanted, segments.length - 1);
          const database = await createTestDatabase();
          const dataSource = await openDataSource(database.url, 4);
          const rows = new ReadModelRepository(dataSource);
          try {
            const log = new EventLogRepository(dataSource);
            const specs = segments.map((segment) => segment.map(own));
            for (const [i, segment] of specs.entries()) {
              await dataSource.query(`SELECT setval('event_log_position_seq', $1)`, [i * PARTITION + 1]);
              // Each segment's partition made, an empty one too (an append makes only those it lands in).
              await log.extend(PARTITION / 2, PARTITION);
              await log.append(segment.map(logEntry));
            }
            const logged = await allEntries(log);
            const projections = new ProjectionRepository();
            const runner = dataSource.createQueryRunner();
            await runner.connect();
            await projections.prepareLane(runner);
            await catchUp(projections, runner, PROJECTIONS, 20, logged.length);
            const missing = new Set(
              specs
                .flat()
                .filter((spec) => spec.missing)
                .map((spec) => spec.eventId),
            );
            const inArchive = specs.slice(0, archived).flat();
            const bound = inArchive.reduce((newest, spec) => (spec.createdAt > newest ? spec.createdAt : newest), '');
            const instants = [...new Set([bound, ...logged.map((entry) => entry.occurredAt), LATER])]
              .filter((instant) => instant !== '' && instant >= bound)
              .map((instant) => new Date(instant));
            const before = new Map<number, Record<string, unknown>>();
            for (const asOf of instants) before.set(asOf.getTime(), await answers(rows, asOf, false));

            const base = new ArchiveBaseRepository();
            for (let i = 0; i < archived; i++) {
              // In pages of a few entries (each its own transaction), and a second time: a no-op.
              expect(await base.foldIntoArchiveBase(runner, i * PARTITION, (i + 1) * PARTITION, pageSize)).toBe(
                specs[i].length,
              );
              await base.foldIntoArchiveBase(runner, i * PARTITION, (i + 1) * PARTITION);
              await archivePartition(database.url, i === 0 ? 'event_log_0' : `event_log_${i * PARTITION}`);
            }
            await runner.release();

            for (const asOf of instants) {
              const after = await answers(rows, asOf, true);
              expect(after).toEqual(before.get(asOf.getTime()));
              const states = fold(
                logged
                  .filter((entry) => new Date(entry.occurredAt) <= asOf)
                  .map(toWebhookEvent)
                  .filter((event): event is WebhookEvent => event !== null && !missing.has(event.eventId)),
              );
              for (const type of MENU_TYPES) {
                const folded = [...states.values()]
                  .filter((state) => state.type === type)
                  .map((state) => ({ id: state.id, event_id: state.version.eventId, deleted: state.deleted }))
                  .sort((a, b) => (a.id < b.id ? -1 : 1));
                const read = (after[type] as Array<{ id: string; event_id: string; deleted: boolean }>)
                  .map(({ id, event_id, deleted }) => ({ id, event_id, deleted }))
                  .sort((a, b) => (a.id < b.id ? -1 : 1));
                expect(read).toEqual(folded);
              }
            }
          } finally {
            await rows.onApplicationShutdown();
            await dataSource.destroy();
            await database.drop();
          }
        },
      ),
      { numRuns: 8, endOnFailure: true },
    );
  }, 300_000);
});
