import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource } from './support/database.js';
import { newLogEntry } from './support/event-log.js';
import { catchUp } from './support/projection.js';
import { EventLogRepository } from '../src/event-log/event-log.repository.js';
import type { NewLogEntry } from '../src/event-log/log-entry.js';
import type { ApiResource } from '../src/projection/api-resource.js';
import { ResourceQueryService } from '../src/query/resource-query.service.js';
import { MENU_PROJECTION, PROJECTIONS } from '../src/projection/projection-definitions.js';
import { ProjectionRepository } from '../src/projection/projection.repository.js';
import { ReadModelRepository } from '../src/query/read-model.repository.js';
import { RESOURCE_TABLES } from '../src/projection/resource-tables.js';
import { Change, START } from '../src/changes/change.js';
import { ChangeLogRepository } from '../src/changes/change-log.repository.js';

interface Spec {
  type: string;
  kind: 'created' | 'updated' | 'destroyed' | 'broken';
  subjectId: string;
  createdAt: string;
  seq: number | null;
  eventId: string;
  title: string;
}

function logEntry(spec: Spec): NewLogEntry {
  const included =
    spec.kind === 'destroyed' || spec.kind === 'broken'
      ? []
      : [
          {
            id: spec.subjectId,
            type: spec.type,
            attributes: { id: Number(spec.subjectId), title: spec.title },
            relationships: { traits: { data: [{ id: '1', type: 'trait' }] } },
          },
        ];
  return newLogEntry({
    eventId: spec.eventId,
    eventType: `${spec.type}.${spec.kind === 'broken' ? 'updated' : spec.kind}`,
    subjectType: spec.type,
    subjectId: spec.subjectId,
    occurredAt: spec.createdAt,
    seq: spec.seq,
    included,
  });
}

const anEvent: fc.Arbitrary<Spec> = fc.record({
  type: fc.constantFrom('collection', 'product', 'trait_option'),
  kind: fc.oneof(
    { weight: 12, arbitrary: fc.constantFrom('created' as const, 'updated' as const, 'destroyed' as const) },
    { weight: 1, arbitrary: fc.constant('broken' as const) },
  ),
  subjectId: fc.constantFrom('1', '2', '10'),
  createdAt: fc.constantFrom('2024-01-01T00:00:00.000Z', '2024-01-01T00:00:00.001Z', '2024-01-02T00:00:00.000Z'),
  seq: fc.option(fc.integer({ min: 1, max: 4 }), { nil: null }),
  eventId: fc.uuid(),
  title: fc.constantFrom('a', 'b', 'c'),
});

async function everyChange(changes: ChangeLogRepository): Promise<Change[]> {
  const all: Change[] = [];
  let after = START;
  for (;;) {
    const page = await changes.readAfter(after, { limit: 7 });
    all.push(...page.changes.map((entry) => entry.change));
    if (page.changes.length === 0) return all;
    after = page.next;
  }
}

/** Every resource of the read model as GET /api/v1/{type}/{id} answers it (deleted ones included). */
async function apiState(dataSource: DataSource): Promise<Map<string, ApiResource>> {
  const query = new ResourceQueryService(new ReadModelRepository(dataSource));
  const state = new Map<string, ApiResource>();
  for (const table of Object.values(RESOURCE_TABLES).filter((t) => t.schema === 'proj_menu')) {
    for (const { id } of await dataSource.query(`SELECT id FROM ${table.schema}.${table.name}`)) {
      state.set(`${table.type}/${id}`, await query.get(table.name, id));
    }
  }
  return state;
}

describe('the change log written by the projector (PostgreSQL)', () => {
  it("applied in seq order equals the read model as the API shows it; each resource's changes come in version order, none repeats a state", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(anEvent, { minLength: 1, maxLength: 80 }),
        fc.integer({ min: 1, max: 25 }),
        fc.integer({ min: 1, max: 20 }),
        fc.infiniteStream(fc.double({ min: 0, max: 1, noNaN: true })),
        async (specs, pageSize, batchSize, randoms) => {
          const database = await createTestDatabase();
          const dataSource = await openDataSource(database.url, 4);
          try {
            const log = new EventLogRepository(dataSource);
            const projections = new ProjectionRepository();
            // Duplicate deliveries (same event id) and redeliveries in another order.
            const delivered = [...specs, ...specs.filter(() => randoms.next().value < 0.3)]
              .sort(() => randoms.next().value - 0.5)
              .map(logEntry);
            const runner = dataSource.createQueryRunner();
            await runner.connect();
            await projections.prepare(runner);
            for (let i = 0; i < delivered.length; i += batchSize) {
              await log.append(delivered.slice(i, i + batchSize));
              if (randoms.next().value < 0.5) await projections.applyPage(runner, MENU_PROJECTION, pageSize);
            }
            const total = (await log.list({ after: 0, limit: 100000 })).length;
            await catchUp(projections, runner, PROJECTIONS, pageSize, total, 60_000);
            // Retrying parked events (as reconcile does) publishes nothing for those that still fail.
            await projections.retryParked(runner, MENU_PROJECTION);
            await runner.release();

            const changes = await everyChange(new ChangeLogRepository(dataSource));
            expect(changes.map((change) => change.seq)).toEqual(
              [...changes.map((change) => change.seq)].sort((a, b) => a - b),
            );
            const applied = new Map<string, ApiResource>();
            for (const change of changes) applied.set(`${change.type}/${change.id}`, change.resource);
            expect(new Map([...applied].sort())).toEqual(new Map([...(await apiState(dataSource))].sort()));

            const versions = new Map<number, string>(
              (
                await dataSource.query(
                  `SELECT position::int AS position, to_char(occurred_at AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSUS') || '/'
                    || lpad(coalesce(event_seq, 0)::text, 5, '0') || '/' || event_id AS version FROM event_log`,
                )
              ).map((row: { position: number; version: string }) => [row.position, row.version]),
            );
            const parked = new Set(
              (await dataSource.query(`SELECT position::int AS position FROM proj_menu.parked_events`)).map(
                (row: { position: number }) => row.position,
              ),
            );
            const last = new Map<string, Change>();
            for (const change of changes) {
              const key = `${change.type}/${change.id}`;
              expect(parked.has(change.resource.version.position)).toBe(false);
              expect(change.op).toBe(change.resource.deleted ? 'delete' : 'upsert');
              const before = last.get(key);
              if (before) {
                expect(
                  versions.get(change.resource.version.position)! >= versions.get(before.resource.version.position)!,
                ).toBe(true);
                expect(change.resource).not.toEqual(before.resource);
              }
              last.set(key, change);
            }
            expect(new Set(changes.map((change) => change.change_id)).size).toBe(changes.length);
          } finally {
            await dataSource.destroy();
            await database.drop();
          }
        },
      ),
      { numRuns: 10, endOnFailure: true },
    );
  }, 300_000);
});
