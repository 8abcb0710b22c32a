import type { Change } from '../../changes/change.js';
import { RESOURCE_TABLES } from '../../projection/resource-tables.js';

/** How a column is typed in the target: PostgreSQL and MySQL each map these to their own types. */
export type ColumnKind = 'text' | 'integer' | 'boolean' | 'number' | 'timestamp' | 'json';

export interface TableColumn {
  name: string;
  kind: ColumnKind;
}

/** A typed column read from an attribute of the resource (named as the attribute without a trailing `?`). */
interface AttributeColumn extends TableColumn {
  attribute: string;
}

/**
 * The spec's attributes of each type (docs/reference.md §12; collections, whose fields the spec does
 * not show: title and description) and its relationships, each a `<relationship>_ids` column.
 */
export const SPEC: Record<string, { attributes: Record<string, ColumnKind>; relationships: string[] }> = {
  collection: { attributes: { title: 'text', description: 'text' }, relationships: ['products'] },
  product: {
    attributes: { title: 'text', description: 'text', available: 'boolean', base_cost: 'json' },
    relationships: ['traits', 'externally_managed_product_override'],
  },
  trait: {
    attributes: { title: 'text', description: 'text', required: 'boolean', allow_multiple: 'boolean' },
    relationships: ['trait_options'],
  },
  trait_option: {
    attributes: {
      title: 'text',
      description: 'text',
      available: 'boolean',
      default: 'boolean',
      cost_adjustment: 'json',
    },
    relationships: ['trait'],
  },
  order: {
    attributes: {
      note: 'text',
      due_at: 'timestamp',
      'for_pickup?': 'boolean',
      status: 'text',
      created_at: 'timestamp',
      'order_dependencies_are_present_and_available_for_reorder?': 'boolean',
      delivery_method: 'json',
      subtotal: 'json',
      total: 'json',
      history: 'json',
    },
    relationships: ['order_products', 'store', 'user', 'table', 'feedback'],
  },
  order_product: {
    attributes: { note: 'text', quantity: 'integer', total: 'integer', unit_total: 'integer', cost: 'json' },
    relationships: ['product', 'order_product_trait_options'],
  },
  order_product_trait_option: { attributes: { cost: 'json' }, relationships: ['trait_option'] },
  store: {
    attributes: {
      title: 'text',
      description: 'text',
      brand_color: 'text',
      latitude: 'number',
      longitude: 'number',
      opening_times: 'json',
      status: 'text',
      demo: 'boolean',
      active: 'boolean',
      due_at_options_mode: 'text',
      created_at: 'timestamp',
      is_takeout: 'boolean',
      is_restaurant: 'boolean',
      geocoded_address: 'text',
      prevent_orders_being_placed_outside_of_opening_times: 'boolean',
      table_is_required_for_eat_in_orders: 'boolean',
      'accepting_orders?': 'boolean',
      due_at_options: 'json',
      logo: 'json',
      distance: 'json',
      walking_distance: 'json',
    },
    relationships: ['photos', 'tables', 'loyalty_scheme'],
  },
};

/** The columns every table has besides the typed ones; `owner_id` and `id` are the primary key. */
export const KEY_COLUMNS: readonly TableColumn[] = [
  { name: 'owner_id', kind: 'text' },
  { name: 'id', kind: 'text' },
];
export const TRAILING_COLUMNS: readonly TableColumn[] = [
  { name: 'resource', kind: 'json' },
  { name: 'version_occurred_at', kind: 'timestamp' },
  { name: 'seq', kind: 'integer' },
  { name: 'synced_at', kind: 'timestamp' },
];

/** One followed type's table: its name (the API's plural type) and its columns in order. */
export interface TargetTable {
  type: string;
  name: string;
  /** The typed columns: attributes, then `<relationship>_ids`. */
  columns: readonly TableColumn[];
}

const attributeColumns = (type: string): AttributeColumn[] =>
  Object.entries(SPEC[type].attributes).map(([attribute, kind]) => ({
    name: attribute.replace(/\?$/, ''),
    kind,
    attribute,
  }));

const relationshipColumns = (type: string): TableColumn[] =>
  SPEC[type].relationships.map((relationship) => ({ name: `${relationship}_ids`, kind: 'json' }));

export function targetTable(type: string): TargetTable {
  const table = RESOURCE_TABLES[type as keyof typeof RESOURCE_TABLES];
  if (table === undefined || SPEC[type] === undefined) throw new Error(`no table for type ${type}`);
  return { type, name: table.name, columns: [...attributeColumns(type), ...relationshipColumns(type)] };
}

/** Every column of a table, in order: the key, the typed ones, then resource, version, seq, synced_at. */
export function allColumns(table: TargetTable): TableColumn[] {
  return [...KEY_COLUMNS, ...table.columns, ...TRAILING_COLUMNS];
}

/** A row to write: the typed values, `resource`, the version's time and the change's seq (synced_at is the target's clock). */
export interface TargetRow {
  owner_id: string;
  id: string;
  /** By column name; null where the resource has no such value or a value of another type. */
  values: Record<string, unknown>;
  resource: Change['resource'];
  version_occurred_at: string | null;
  seq: number;
}

const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$/;

/**
 * The value of a typed column, or null when the resource's value does not fit the column's type:
 * the change must still be written (its `resource` column holds the value as it is), never block the sink.
 */
export function typedValue(kind: ColumnKind, value: unknown): unknown {
  if (value === undefined || value === null) return null;
  switch (kind) {
    case 'text':
      return typeof value === 'string' ? value : null;
    case 'integer':
      return typeof value === 'number' && Number.isSafeInteger(value) ? value : null;
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? value : null;
    case 'boolean':
      return typeof value === 'boolean' ? value : null;
    case 'timestamp':
      return typeof value === 'string' && ISO_TIMESTAMP.test(value) && !Number.isNaN(Date.parse(value)) ? value : null;
    case 'json':
      return value;
  }
}

/** The ids of a relationship in the resource's order: `{data: [...]}` or `{data: {...}|null}`. */
export function relationshipIds(relationship: unknown): string[] | null {
  if (typeof relationship !== 'object' || relationship === null || !('data' in relationship)) return null;
  const data = (relationship as { data: unknown }).data;
  const idOf = (identifier: unknown) =>
    typeof identifier === 'object' && identifier !== null && 'id' in identifier
      ? String((identifier as { id: unknown }).id)
      : null;
  if (data === null) return [];
  const ids = (Array.isArray(data) ? data : [data]).map(idOf);
  return ids.every((id) => id !== null) ? (ids as string[]) : null;
}

/** The row an upsert writes for a change of the table's type. */
export function targetRow(table: TargetTable, change: Change): TargetRow {
  const { attributes, relationships } = change.resource;
  const values: Record<string, unknown> = {};
  for (const column of attributeColumns(table.type))
    values[column.name] = typedValue(column.kind, attributes?.[column.attribute]);
  for (const relationship of SPEC[table.type].relationships)
    values[`${relationship}_ids`] = relationshipIds(relationships?.[relationship]);
  return {
    owner_id: change.owner_id ?? '',
    id: change.id,
    values,
    resource: change.resource,
    version_occurred_at: typedValue('timestamp', change.resource.version?.occurred_at) as string | null,
    seq: change.seq,
  };
}
