import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource } from '../../test/support/database.js';
import { eventually } from '../../test/support/eventually.js';
import { catchUp } from '../../test/support/projection.js';
import { newLogEntry } from '../../test/support/event-log.js';
import { ChangeLogRepository } from '../changes/change-log.repository.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import type { LogEntry, NewLogEntry } from '../event-log/log-entry.js';
import { fold, ResourceState } from '../domain/evolve.js';
import { toWebhookEvent } from '../projection/from-log-entry.js';
import { MENU_PROJECTION } from '../projection/projection-definitions.js';
import { ProjectionRepository } from '../projection/projection.repository.js';
import { poolOfItsOwn } from '../database/postgres-connection.js';
import { AS_OF_SESSION_SETTINGS, ReadModelRepository, ResourceRow } from './read-model.repository.js';
import { RESOURCE_TABLES, ResourceTable } from '../projection/resource-tables.js';

/**
 * `as_of` on menu resources (a newest-version lookup per candidate id) against the fold of the
 * events up to the instant (docs/reference.md §4): a log partly projected (some ids and events only past the
 * checkpoint), events parked for a missing subject left out, lists by owner with and without
 * deleted ones, walked in pages, and reads by id.
 */
const TYPES = ['collection', 'product', 'trait', 'trait_option'] as const;
const IDS = ['1', '2', '10', 'x1'];
const TIMES = [
  '2024-01-01T00:00:00.000Z',
  '2024-01-01T00:00:00.001Z',
  '2024-01-02T00:00:00.000Z',
  '2024-01-03T00:00:00.000Z',
];
/** One owner per id: an id moved between owners is the documented limit of the owner filter. */
const ownerOf = (id: string) => (id === '1' || id === 'x1' ? 'o1' : 'o2');

interface Spec {
  type: (typeof TYPES)[number];
  kind: 'created' | 'updated' | 'destroyed';
  id: string;
  at: string;
  seq: number | null;
  eventId: string;
  title: string;
  /** A create/update that does not include its subject (an id of its own): parked by the projector. */
  missing: boolean;
}

const aSpec = fc.record({
  type: fc.constantFrom(...TYPES),
  kind: fc.constantFrom('created', 'updated', 'destroyed' as const),
  id: fc.constantFrom(...IDS),
  at: fc.constantFrom(...TIMES),
  seq: fc.option(fc.integer({ min: 1, max: 3 }), { nil: null }),
  eventId: fc.uuid(),
  title: fc.string({ maxLength: 4 }),
  missing: fc.integer({ min: 0, max: 7 }).map((n) => n === 0),
}) as fc.Arbitrary<Spec>;

/**
 * A create/update without its subject is parked when it wins its page (the projector parses only
 * winners): each gets an id of its own, so it always wins and is always parked.
 */
function logEntry(given: Spec): NewLogEntry {
  const spec = given.missing && given.kind !== 'destroyed' ? { ...given, id: `m${given.eventId.slice(0, 8)}` } : given;
  const resource = {
    id: spec.id,
    type: spec.type,
    attributes: { title: spec.title },
    relationships: {
      x: {
        data:
          spec.title === ''
            ? []
            : [
                { id: spec.title.length, type: 'y' },
                { id: spec.id, type: 'y' },
              ],
      },
    },
  };
  const included = spec.kind === 'destroyed' || spec.missing ? [] : [resource];
  return newLogEntry({
    eventId: spec.eventId,
    eventType: `${spec.type}.${spec.kind}`,
    subjectType: spec.type,
    subjectId: spec.id,
    ownerId: ownerOf(spec.id),
    occurredAt: spec.at,
    seq: spec.seq,
    included,
  });
}

const sortKey = (id: string) => (/^[0-9]{1,30}$/.test(id) ? `0${id.padStart(30, '0')}` : `1${id}`);

function shape(row: ResourceRow | ResourceState) {
  if ('version' in row) {
    return {
      id: row.id,
      owner_id: row.ownerId,
      attributes: row.attributes,
      relationships: row.relationships,
      deleted: row.deleted,
      event_id: row.version.eventId,
      position: String(row.position),
    };
  }
  return {
    id: row.id,
    owner_id: row.owner_id,
    attributes: row.attributes,
    relationships: row.relationships,
    deleted: row.deleted,
    event_id: row.event_id,
    position: String(row.position),
  };
}

async function walk(
  rows: ReadModelRepository,
  table: ResourceTable,
  filter: { ownerId?: string; includeDeleted: boolean; asOf: Date },
  limit: number,
): Promise<ResourceRow[]> {
  const all: ResourceRow[] = [];
  for (;;) {
    const page = await rows.find(table, { ...filter, limit, afterSortKey: all.at(-1)?.sort_key });
    all.push(...page);
    if (page.length < limit) return all;
  }
}

describe('as_of on menu resources (PostgreSQL)', () => {
  it('equals the fold of the unparked events up to the instant, projected or not yet', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(aSpec, { minLength: 1, maxLength: 60 }),
        fc.array(aSpec, { maxLength: 20 }),
        async (projectedSpecs, tailSpecs) => {
          const database = await createTestDatabase();
          const dataSource: DataSource = await openDataSource(database.url, 4);
          const rows = new ReadModelRepository(dataSource);
          try {
            const log = new EventLogRepository(dataSource);
            const projections = new ProjectionRepository();
            const changes = new ChangeLogRepository(dataSource);
            await log.append(projectedSpecs.map(logEntry));
            const runner = dataSource.createQueryRunner();
            await runner.connect();
            await projections.prepare(runner);
            await catchUp(projections, runner, [MENU_PROJECTION], 50, projectedSpecs.length);
            await runner.release();
            // Past the checkpoint: never parked (yet), so these carry their subject.
            await log.append(tailSpecs.map((spec) => logEntry({ ...spec, missing: false })));
            const summaries = await log.list({ after: 0, limit: 100000 });
            const entries: LogEntry[] = await Promise.all(
              summaries.map(async (summary) => (await log.findByPosition(summary.position))!),
            );
            const parked = new Set(
              (await dataSource.query(`SELECT position::int AS position FROM proj_menu.parked_events`)).map(
                (row: { position: number }) => row.position,
              ),
            );
            expect(parked.size).toBe(projectedSpecs.filter((spec) => spec.missing && spec.kind !== 'destroyed').length);
            const unparked = entries.filter((entry) => !parked.has(entry.position));

            // A live page as JSON texts (the hot page read) holds what the rows hold, at the same change position.
            for (const type of TYPES) {
              const table = RESOURCE_TABLES[type];
              for (const filter of [{ includeDeleted: true }, { ownerId: 'o1', includeDeleted: false, limit: 2 }]) {
                const live = {
                  rows: await rows.find(table, filter),
                  position: await changes.positionInSnapshot(dataSource),
                };
                const docs = await rows.findDocsWithChangePosition(table, filter);
                expect(docs.position).toEqual(live.position);
                for (const row of live.rows) {
                  const one = await rows.findDoc(table, row.id);
                  expect({ deleted: one?.deleted, doc: one?.doc }).toEqual({
                    deleted: row.deleted,
                    doc: docs.rows.find((doc) => doc.id === row.id)?.doc,
                  });
                }
                expect(docs.rows.map((row) => JSON.parse(row.doc))).toEqual(
                  live.rows.map((row) => ({
                    type,
                    id: row.id,
                    owner_id: row.owner_id,
                    attributes: row.attributes,
                    relationships: row.relationships,
                    version: {
                      event_id: row.event_id,
                      occurred_at: new Date(row.occurred_at).toISOString(),
                      position: Number(row.position),
                    },
                    deleted: row.deleted,
                  })),
                );
              }
            }

            for (const instant of ['2023-12-31T00:00:00.000Z', ...TIMES]) {
              const asOf = new Date(instant);
              const states = fold(
                unparked
                  .filter((entry) => new Date(entry.occurredAt) <= asOf)
                  .map(toWebhookEvent)
                  .filter((event) => event !== null),
              );
              for (const type of TYPES) {
                const table = RESOURCE_TABLES[type];
                const expected = [...states.values()]
                  .filter((state) => state.type === type)
                  .sort((a, b) => (sortKey(a.id) < sortKey(b.id) ? -1 : 1));
                for (const ownerId of [undefined, 'o1', 'o2']) {
                  for (const includeDeleted of [false, true]) {
                    const wanted = expected
                      .filter(
                        (state) =>
                          (ownerId === undefined || state.ownerId === ownerId) && (includeDeleted || !state.deleted),
                      )
                      .map(shape);
                    expect((await rows.find(table, { ownerId, includeDeleted, asOf })).map(shape)).toEqual(wanted);
                    expect((await walk(rows, table, { ownerId, includeDeleted, asOf }, 2)).map(shape)).toEqual(wanted);
                  }
                }
                // The same resources as JSON texts built by PostgreSQL (an as_of menu), with the ids `x` links.
                const live = expected.filter((state) => !state.deleted);
                expect(
                  (await rows.findDocsAsOf(table, { asOf }, 'x')).map((row) => ({
                    ...JSON.parse(row.doc),
                    links: row.links,
                  })),
                ).toEqual(
                  live.map((state) => ({
                    type,
                    id: state.id,
                    owner_id: state.ownerId,
                    attributes: state.attributes,
                    relationships: state.relationships,
                    version: {
                      event_id: state.version.eventId,
                      occurred_at: new Date(state.version.occurredAt).toISOString(),
                      position: state.position,
                    },
                    deleted: false,
                    links: (state.relationships.x as { data: Array<{ id: unknown }> }).data.map((link) =>
                      String(link.id),
                    ),
                  })),
                );
                for (const id of IDS) {
                  const state = states.get(`${type}\u0000${id}`);
                  const byIdDocs = await rows.findDocsAsOf(table, { ids: [id], includeDeleted: true, asOf });
                  expect(
                    byIdDocs
                      .map((row) => ({ deleted: row.deleted, ...JSON.parse(row.doc) }))
                      .map(({ deleted, id: docId, attributes, version }) => ({
                        deleted,
                        id: docId,
                        attributes,
                        event_id: version.event_id,
                      })),
                  ).toEqual(
                    state === undefined
                      ? []
                      : [{ deleted: state.deleted, id, attributes: state.attributes, event_id: state.version.eventId }],
                  );
                  expect((await rows.find(table, { ids: [id], includeDeleted: true, asOf })).map(shape)).toEqual(
                    state === undefined ? [] : [shape(state)],
                  );
                }
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

  it('runs on sessions of its own that plan prepared statements generically, ended at shutdown', async () => {
    const database = await createTestDatabase();
    const dataSource: DataSource = await openDataSource(database.url, 2);
    const rows = new ReadModelRepository(dataSource);
    const sessions = async () =>
      (
        await dataSource.query(`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'menu-sync as_of'`)
      )[0].n as number;
    const generic = poolOfItsOwn(dataSource, { max: 1 }, AS_OF_SESSION_SETTINGS);
    try {
      expect((await generic.query('SHOW plan_cache_mode')).rows).toEqual([{ plan_cache_mode: 'force_generic_plan' }]);
      expect(await dataSource.query('SHOW plan_cache_mode')).toEqual([{ plan_cache_mode: 'auto' }]);
      expect(await sessions()).toBe(0);
      await rows.find(RESOURCE_TABLES.product, { ownerId: 'o1', limit: 10, asOf: new Date() });
      await rows.findDocsAsOf(RESOURCE_TABLES.trait, { ids: ['1'], asOf: new Date() });
      expect(await sessions()).toBeGreaterThan(0);
      await rows.onApplicationShutdown();
      // A backend leaves pg_stat_activity a moment after its client closed the socket; a pool not
      // ended would keep its idle connections for pg's idle timeout (10 s), past this wait.
      await eventually(async () => expect(await sessions()).toBe(0));
    } finally {
      await generic.end();
      await rows.onApplicationShutdown();
      await dataSource.destroy();
      await database.drop();
    }
  });
});
