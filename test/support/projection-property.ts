import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import type { ResourceState } from '../../src/domain/evolve.js';
import type { EventLogRepository } from '../../src/event-log/event-log.repository.js';
import type { LogEntry, NewLogEntry } from '../../src/event-log/log-entry.js';
import { RESOURCE_TABLES } from '../../src/projection/resource-tables.js';
import { newLogEntry } from './event-log.js';

// The random logs of the projection's property tests (src/projection/projector.int-spec.ts,
// src/replay/checkpoint.int-spec.ts), and the read model and fold they compare.

export interface Spec {
  eventType: string;
  subjectType: string;
  subjectId: string;
  createdAt: string;
  seq: number | null;
  eventId: string;
  title: string;
  /** A menu create/update without its subject in `included`: the projector parks it, so it changes nothing. */
  missing?: boolean;
}

/** A log entry for a spec event; order events carry an order, its products, options and store. */
export function logEntry(spec: Spec): NewLogEntry {
  const destroyed = spec.eventType.endsWith('.destroyed');
  const resource = (type: string, id: string, relationships: Record<string, unknown> = {}) => ({
    id,
    type,
    attributes: { id: Number(id), title: `${spec.title} ${type}` },
    relationships,
  });
  const included =
    spec.subjectType === 'order'
      ? [
          resource('order', spec.subjectId, {
            order_products: { data: [{ id: `${spec.subjectId}1`, type: 'order_product' }] },
          }),
          resource('order_product', `${spec.subjectId}1`),
          resource('order_product_trait_option', `${spec.subjectId}2`),
          resource('store', '3'),
          resource('product', '1'),
          resource('user', '42'),
        ]
      : destroyed || spec.missing
        ? []
        : [resource(spec.subjectType, spec.subjectId, { traits: { data: [{ id: '1', type: 'trait' }] } })];
  return newLogEntry({
    eventId: spec.eventId,
    eventType: spec.eventType,
    subjectType: spec.subjectType,
    subjectId: spec.subjectId,
    occurredAt: spec.createdAt,
    seq: spec.seq,
    included,
  });
}

export const menuType = fc.constantFrom('collection', 'product', 'trait', 'trait_option');
export const anEvent = fc
  .oneof(
    { weight: 5, arbitrary: fc.record({ type: menuType, kind: fc.constantFrom('created', 'updated', 'destroyed') }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('order'), kind: fc.constantFrom('created', 'updated') }) },
  )
  .chain(({ type, kind }) =>
    fc.record({
      eventType: fc.constant(`${type}.${kind}`),
      subjectType: fc.constant(type),
      subjectId: fc.constantFrom('1', '2', '10'),
      createdAt: fc.constantFrom('2024-01-01T00:00:00.000Z', '2024-01-01T00:00:00.001Z', '2024-01-02T00:00:00.000Z'),
      seq: fc.option(fc.integer({ min: 1, max: 4 }), { nil: null }),
      eventId: fc.uuid(),
      title: fc.string({ maxLength: 5 }),
      // Now and then a winner without its subject, which sends its page through the full statement.
      missing:
        type !== 'order' && kind !== 'destroyed'
          ? fc.integer({ min: 0, max: 7 }).map((n) => n === 0)
          : fc.constant(false),
    }),
  );

export async function readModel(dataSource: DataSource): Promise<Map<string, Partial<ResourceState>>> {
  const states = new Map<string, Partial<ResourceState>>();
  for (const table of Object.values(RESOURCE_TABLES)) {
    const rows = await dataSource.query(
      `SELECT id, owner_id, attributes, relationships, deleted, event_id, data_event_id FROM ${table.schema}.${table.name}`,
    );
    for (const row of rows) {
      states.set(`${table.type}\u0000${row.id}`, {
        deleted: row.deleted,
        attributes: row.attributes,
        relationships: row.relationships,
        ownerId: row.owner_id,
        version: row.event_id,
        dataVersion: row.data_event_id,
      });
    }
  }
  return states;
}

export function expected(states: Map<string, ResourceState>): Map<string, Partial<ResourceState>> {
  return new Map(
    [...states].map(([key, state]) => [
      key,
      {
        deleted: state.deleted,
        attributes: state.attributes,
        relationships: state.relationships,
        ownerId: state.ownerId,
        version: state.version.eventId as never,
        dataVersion: (state.dataVersion?.eventId ?? null) as never,
      },
    ]),
  );
}

export async function allEntries(log: EventLogRepository): Promise<LogEntry[]> {
  const summaries = await log.list({ after: 0, limit: 100000 });
  return Promise.all(summaries.map(async (summary) => (await log.findByPosition(summary.position))!));
}
