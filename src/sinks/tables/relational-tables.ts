import { RESOURCE_TABLES } from '../../projection/resource-tables.js';
import { ColumnKind, SPEC, TableColumn, TRAILING_COLUMNS } from './table-columns.js';
import type { SchemaTable } from './table-schema.js';

/** A column of the relational layout; `exact`: text compared byte for byte (owners, text ids, currencies). */
export interface RelationalColumn extends TableColumn {
  exact?: boolean;
}

/** A table of the relational layout, as created (docs/reference.md §12, "Relational layout"). */
export interface RelationalTable extends SchemaTable {
  layout: 'relational';
  columns: readonly RelationalColumn[];
}

/** How an id is typed: `integer` (bigint) for the types the spec gives integer ids, else exact text. */
export type IdKind = 'integer' | 'text';

/** A table whose rows belong to one resource, keyed by `<type>_id`: a money map's, or a to-many relationship's. */
export type ChildTable =
  | { kind: 'money'; table: RelationalTable; parent: string; attribute: string }
  | { kind: 'link'; table: RelationalTable; parent: string; relationship: string; child: string; childKind: IdKind };

/** One followed type in the relational layout: its table, how its columns are read, and its child tables. */
export interface RelationalType {
  type: string;
  table: RelationalTable;
  idKind: IdKind;
  /** The typed columns read from attributes (money maps aside), named as the attribute without `?`, `_` added to a reserved word. */
  attributes: ReadonlyArray<{ column: string; attribute: string; kind: ColumnKind }>;
  /** One `<relationship>_id` column per to-one relationship. */
  toOne: ReadonlyArray<{ column: string; relationship: string; kind: IdKind }>;
  children: readonly ChildTable[];
}

/** The spec's types (collections included: the contract makes their ids integers too); each has a table. */
const INTEGER_ID_TYPES = new Set(Object.keys(RESOURCE_TABLES));

/** The type each relationship names and whether it is to-many (the spec's "Relationships" lines). */
export const RELATIONSHIPS: Record<string, Record<string, { type: string; many: boolean }>> = {
  collection: { products: { type: 'product', many: true } },
  product: {
    traits: { type: 'trait', many: true },
    externally_managed_product_override: { type: 'externally_managed_product_override', many: false },
  },
  trait: { trait_options: { type: 'trait_option', many: true } },
  trait_option: { trait: { type: 'trait', many: false } },
  order: {
    order_products: { type: 'order_product', many: true },
    store: { type: 'store', many: false },
    user: { type: 'user', many: false },
    table: { type: 'table', many: false },
    feedback: { type: 'feedback', many: false },
  },
  order_product: {
    product: { type: 'product', many: false },
    order_product_trait_options: { type: 'order_product_trait_option', many: true },
  },
  order_product_trait_option: { trait_option: { type: 'trait_option', many: false } },
  store: {
    photos: { type: 'photo', many: true },
    tables: { type: 'table', many: true },
    loyalty_scheme: { type: 'loyalty_scheme', many: false },
  },
};

/** The currency-keyed money maps: each a child table `<type>_<suffix>`, a row per currency. */
const MONEY_MAPS: Record<string, Record<string, string>> = {
  product: { base_cost: 'prices' },
  trait_option: { cost_adjustment: 'cost_adjustments' },
};

/**
 * Words reserved in PostgreSQL or in MySQL/MariaDB that an attribute might be named; a column so
 * named gets `_` (`default_`). The int-specs create every column of the layout unquoted on both servers.
 */
const RESERVED = new Set(
  `all and any as asc between both by call case cast check collate column condition constraint create cross
  current_date current_time current_timestamp current_user database default delete desc describe distinct div
  do drop dual each else end exists explain false fetch for force foreign from grant group having if ignore in
  index inner insert interval into is join key keys kill leading left like limit lines load lock match mod
  natural not null offset on only option or order outer over partition placing precision primary range read
  references regexp release rename repeat replace require restrict return revoke right rlike row rows schema
  select separator set show some sql table then to trailing trigger true union unique unlock update usage use
  user using values when where while window with write xor`.split(/\s+/),
);

export const columnName = (name: string): string => (RESERVED.has(name) ? `${name}_` : name);

export const idKindOf = (type: string): IdKind => (INTEGER_ID_TYPES.has(type) ? 'integer' : 'text');

const idColumn = (name: string, kind: IdKind): RelationalColumn =>
  kind === 'integer' ? { name, kind: 'integer' } : { name, kind: 'text', exact: true };

const OWNER: RelationalColumn = { name: 'owner_id', kind: 'text', exact: true };

const table = (name: string, columns: RelationalColumn[], primaryKey: string[]): RelationalTable => ({
  layout: 'relational',
  name,
  columns,
  primaryKey,
});

function childTables(type: string, prefix: string): ChildTable[] {
  const parent = `${type}_id`;
  const parentColumn = idColumn(parent, idKindOf(type));
  const children: ChildTable[] = [];
  for (const [attribute, suffix] of Object.entries(MONEY_MAPS[type] ?? {})) {
    const columns = [
      OWNER,
      parentColumn,
      { name: 'currency', kind: 'text', exact: true },
      { name: 'cents', kind: 'integer' },
      { name: 'format', kind: 'text' },
    ] satisfies RelationalColumn[];
    const name = `${prefix}${type}_${suffix}`;
    children.push({ kind: 'money', table: table(name, columns, ['owner_id', parent, 'currency']), parent, attribute });
  }
  for (const [relationship, target] of Object.entries(RELATIONSHIPS[type])) {
    if (!target.many) continue;
    const child = `${target.type}_id`;
    const childKind = idKindOf(target.type);
    const columns = [OWNER, parentColumn, idColumn(child, childKind), { name: 'position', kind: 'integer' as const }];
    const name = `${prefix}${type}_${relationship}`;
    children.push({
      kind: 'link',
      table: table(name, columns, ['owner_id', parent, child]),
      parent,
      relationship,
      child,
      childKind,
    });
  }
  return children;
}

/** A type's tables in the relational layout, named `prefix` + the API's plural (MySQL's tables share the URL's database). */
export function relationalType(type: string, prefix: string): RelationalType {
  const resourceTable = RESOURCE_TABLES[type as keyof typeof RESOURCE_TABLES];
  if (resourceTable === undefined || SPEC[type] === undefined) throw new Error(`no table for type ${type}`);
  const money = MONEY_MAPS[type] ?? {};
  const attributes = Object.entries(SPEC[type].attributes)
    .filter(([attribute]) => money[attribute] === undefined)
    .map(([attribute, kind]) => ({ column: columnName(attribute.replace(/\?$/, '')), attribute, kind }));
  const toOne = Object.entries(RELATIONSHIPS[type])
    .filter(([, target]) => !target.many)
    .map(([relationship, target]) => ({
      column: columnName(`${relationship}_id`),
      relationship,
      kind: idKindOf(target.type),
    }));
  const idKind = idKindOf(type);
  const columns: RelationalColumn[] = [
    OWNER,
    idColumn('id', idKind),
    ...attributes.map(({ column, kind }) => ({ name: column, kind })),
    ...toOne.map(({ column, kind }) => idColumn(column, kind)),
    ...TRAILING_COLUMNS,
  ];
  return {
    type,
    table: table(`${prefix}${resourceTable.name}`, columns, ['owner_id', 'id']),
    idKind,
    attributes,
    toOne,
    children: childTables(type, prefix),
  };
}

/** Every table of the followed types: each type's own, then its child tables. */
export function relationalTables(types: readonly string[], prefix: string): RelationalTable[] {
  return types.flatMap((type) => {
    const spec = relationalType(type, prefix);
    return [spec.table, ...spec.children.map((child) => child.table)];
  });
}

/** The longest table name of the layout: a MySQL prefix leaves room for it within the 64 characters of a name. */
export const LONGEST_RELATIONAL_NAME = Math.max(
  ...relationalTables(Object.keys(SPEC), '').map((relational) => relational.name.length),
);

/** The longest `table_prefix` of a relational MySQL sink: its longest table name stays within MySQL's 64 characters. */
export const RELATIONAL_PREFIX_MAX = 64 - LONGEST_RELATIONAL_NAME;
