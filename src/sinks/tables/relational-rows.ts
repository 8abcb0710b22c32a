import type { Change } from '../../changes/change.js';
import { typedValue } from './table-columns.js';
import type { ChildTable, IdKind, RelationalType } from './relational-tables.js';

/**
 * A change the relational layout cannot write as it stands: an id of an integer-id type that is not
 * an integer (docs/upstream.md). The batch is not written; the sink retries it and shows this.
 */
export class RelationalIdError extends Error {}

/** A decimal integer as the log spells integer ids (no sign on 0, no leading zeros), within bigint. */
const INTEGER = /^(0|-?[1-9][0-9]{0,18})$/;
const BIGINT_MIN = -(2n ** 63n);
const BIGINT_MAX = 2n ** 63n - 1n;

const isBigint = (id: string) => INTEGER.test(id) && BigInt(id) >= BIGINT_MIN && BigInt(id) <= BIGINT_MAX;

/** A row to write, by column name; ids as decimal text (exact beyond 2^53), JSON and timestamps as values. */
export type RelationalRow = Record<string, unknown>;

/** What a resource's upsert writes: its row, and its rows of each child table (by table name). */
export interface RelationalRows {
  row: RelationalRow;
  children: Map<string, RelationalRow[]>;
}

/** An id of `kind` as written (checked when the column is a bigint); `what` names it in the error. */
function idValue(id: string, kind: IdKind, what: () => string): string {
  if (kind === 'integer' && !isBigint(id))
    throw new RelationalIdError(
      `${what()} is not an integer (a decimal of at most 19 digits, no leading zero): the relational layout keeps it as a bigint, so the batch is not written`,
    );
  return id;
}

const quoted = (text: string) => JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}…` : text);

/** The key of a change's row: its owner and its id, checked. */
export function relationalKey(spec: RelationalType, change: Change): { owner_id: string; id: string } {
  const owner = change.owner_id ?? '';
  const id = idValue(
    change.id,
    spec.idKind,
    () => `the id ${quoted(change.id)} of ${spec.type} (owner ${quoted(owner)})`,
  );
  return { owner_id: owner, id };
}

/** The id of a resource identifier (`{id, type}`), as canonical ids read it: a string, or a number as its decimal. */
function identifierId(identifier: unknown): string | null {
  if (typeof identifier !== 'object' || identifier === null || !('id' in identifier)) return null;
  const id = (identifier as { id: unknown }).id;
  return typeof id === 'string' ? id : typeof id === 'number' && Number.isSafeInteger(id) ? String(id) : null;
}

const dataOf = (relationship: unknown): unknown =>
  typeof relationship === 'object' && relationship !== null && 'data' in relationship
    ? (relationship as { data: unknown }).data
    : undefined;

function childRows(spec: RelationalType, child: ChildTable, change: Change, key: RelationalRow): RelationalRow[] {
  const { attributes, relationships } = change.resource;
  const parent = { owner_id: key.owner_id, [child.parent]: key.id };
  if (child.kind === 'money') {
    const map = attributes?.[child.attribute];
    if (typeof map !== 'object' || map === null || Array.isArray(map)) return [];
    return Object.entries(map as Record<string, unknown>).map(([currency, money]) => {
      const amount = (typeof money === 'object' && money !== null ? money : {}) as Record<string, unknown>;
      return {
        ...parent,
        currency,
        cents: typedValue('integer', amount.cents),
        format: typedValue('text', amount.format),
      };
    });
  }
  const data = dataOf(relationships?.[child.relationship]);
  if (!Array.isArray(data)) return [];
  const seen = new Set<string>();
  const rows: RelationalRow[] = [];
  for (const identifier of data) {
    const id = identifierId(identifier);
    // A repeated child keeps its first place: the key is (owner, parent, child).
    if (id === null || seen.has(id)) continue;
    seen.add(id);
    const what = () =>
      `the ${child.relationship} id ${quoted(id)} of ${spec.type} ${quoted(String(key.id))} (owner ${quoted(String(key.owner_id))})`;
    rows.push({ ...parent, [child.child]: idValue(id, child.childKind, what), position: rows.length });
  }
  return rows;
}

/** The rows an upsert writes: every column of the type's table, and its child rows (money per currency, links in order). */
export function relationalRows(spec: RelationalType, change: Change): RelationalRows {
  const key = relationalKey(spec, change);
  const { attributes, relationships } = change.resource;
  const row: RelationalRow = { ...key };
  for (const { column, attribute, kind } of spec.attributes) row[column] = typedValue(kind, attributes?.[attribute]);
  for (const { column, relationship, kind } of spec.toOne) {
    const id = identifierId(dataOf(relationships?.[relationship]));
    const what = () =>
      `the ${relationship} id ${quoted(id!)} of ${spec.type} ${quoted(key.id)} (owner ${quoted(key.owner_id)})`;
    row[column] = id === null ? null : idValue(id, kind, what);
  }
  row.resource = change.resource;
  row.version_occurred_at = typedValue('timestamp', change.resource.version?.occurred_at);
  row.seq = change.seq;
  const children = new Map(spec.children.map((child) => [child.table.name, childRows(spec, child, change, key)]));
  return { row, children };
}

/** The rows of a batch's upserts, every id of the batch checked first (deletes' too): nothing is written when one fails. */
export function batchRows(spec: RelationalType, changes: readonly Change[]): Map<Change, RelationalRows> {
  const rows = new Map<Change, RelationalRows>();
  for (const change of changes) {
    if (change.op === 'upsert') rows.set(change, relationalRows(spec, change));
    else relationalKey(spec, change);
  }
  return rows;
}

/** What a batch of one table does (its newest change per row, `stored` and `buried`: the rows' and tombstones' seqs by `rowKey`). */
export interface RelationalPlan {
  /** Upserts newer than their row and its tombstone: the row and its child rows are replaced. */
  upserts: Change[];
  /** Deletes newer than their row: the row and its child rows are removed. */
  removals: Change[];
  /** Every delete, for the tombstones (kept at the newest delete's seq). */
  deletes: Change[];
}

export const rowKey = (ownerId: string, id: string) => `${ownerId}\u0000${id}`;

export function planRelational(
  changes: readonly Change[],
  stored: ReadonlyMap<string, number | null>,
  buried: ReadonlyMap<string, number>,
): RelationalPlan {
  const plan: RelationalPlan = { upserts: [], removals: [], deletes: [] };
  for (const change of changes) {
    const key = rowKey(change.owner_id ?? '', change.id);
    const row = stored.get(key);
    const older = row === undefined || row === null || row < change.seq;
    if (change.op === 'delete') {
      plan.deletes.push(change);
      if (stored.has(key) && older) plan.removals.push(change);
    } else if (older && (buried.get(key) ?? -1) < change.seq) plan.upserts.push(change);
  }
  return plan;
}
