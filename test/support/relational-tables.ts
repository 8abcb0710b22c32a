import { relationalType } from '../../src/sinks/tables/relational-tables.js';
import { idsOf, json, normalise, TABLE_TYPES } from './table-sinks.js';

type Json = any;

const byParent = (rows: Json[], parent: string) => {
  const grouped = new Map<string, Json[]>();
  for (const row of rows) grouped.set(String(row[parent]), [...(grouped.get(String(row[parent])) ?? []), row]);
  return grouped;
};

/**
 * A relational sink's tables for one type and owner equal the API's `resources` (docs/reference.md
 * §12, "Relational layout"): a row per resource, every column equal to its attribute and every
 * `<relationship>_id` to its identifier, `resource` the resource; a row per currency of each money
 * map; the link rows of each to-many relationship in the resource's order, counted from 0; no
 * child row of a resource the API does not show. `rowsOf` answers a table's rows, every column.
 */
export async function expectRelationalMatches(
  rowsOf: (table: string) => Promise<Json[]>,
  type: string,
  ownerId: string,
  resources: Json[],
): Promise<void> {
  const spec = relationalType(type, '');
  const mine = (await rowsOf(TABLE_TYPES[type])).filter((row) => row.owner_id === ownerId);
  expect(mine.map((row) => String(row.id)).sort()).toEqual(resources.map((resource) => resource.id).sort());
  const rows = new Map(mine.map((row) => [String(row.id), row]));
  for (const resource of resources) {
    const row = rows.get(resource.id);
    const actual: Record<string, unknown> = {};
    const expected: Record<string, unknown> = {};
    for (const { column, attribute } of spec.attributes) {
      expected[column] = resource.attributes?.[attribute] ?? null;
      actual[column] = row[column] === null ? null : normalise(row[column], expected[column]);
    }
    for (const { column, relationship } of spec.toOne) {
      expected[column] = resource.relationships?.[relationship]?.data?.id ?? null;
      actual[column] = row[column] === null ? null : String(row[column]);
    }
    expect([resource.id, actual]).toEqual([resource.id, expected]);
    expect(json(row.resource)).toEqual(resource);
    const occurredAt = new Date(resource.version.occurred_at).toISOString();
    expect(normalise(row.version_occurred_at, occurredAt)).toBe(occurredAt);
  }
  for (const child of spec.children) {
    const found = (await rowsOf(child.table.name)).filter((row) => row.owner_id === ownerId);
    const grouped = byParent(found, child.parent);
    for (const parent of grouped.keys()) expect(rows.has(parent)).toBe(true);
    for (const resource of resources) {
      const own = grouped.get(resource.id) ?? [];
      if (child.kind === 'money') {
        const map = resource.attributes?.[child.attribute] ?? {};
        const expected = Object.entries(map).map(([currency, money]: [string, Json]) => [
          currency,
          money?.cents ?? null,
          money?.format ?? null,
        ]);
        const actual = own.map((row) => [row.currency, row.cents === null ? null : Number(row.cents), row.format]);
        expect([resource.id, actual.sort()]).toEqual([resource.id, expected.sort()]);
      } else {
        const relationship = resource.relationships?.[child.relationship];
        const expected = relationship === undefined ? [] : [...new Set(idsOf(relationship))];
        const ordered = [...own].sort((a, b) => Number(a.position) - Number(b.position));
        expect([resource.id, ordered.map((row) => [String(row[child.child]), Number(row.position)])]).toEqual([
          resource.id,
          expected.map((id, position) => [id, position]),
        ]);
      }
    }
  }
}
