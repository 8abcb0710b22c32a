import { encodeChangeCursor } from '../../changes/change-cursor.js';
import { START } from '../../changes/change.js';
import type { EgressGuard } from '../egress/egress-guard.js';
import type { Sink } from '../sink.js';
import { describeDatabaseError } from './table-batch.js';
import { SPEC } from './table-columns.js';
import { sinkTables } from './table-schema.js';
import { DEFAULT_SCHEMA, DEFAULT_TABLE_PREFIX, isTableKind, parseTableUrl } from './table-target.js';
import { openVerifyTarget, TableRepair, VerifiedTable, VerifyTarget } from './table-verify-target.js';
import type { TableVerifyRepository } from './table-verify.repository.js';
import { ComparedTable, compareRows, documentRow, documentTable, RowKey, TypeComparison } from './table-verify.js';
import type { Change } from '../../changes/change.js';
import { relationalRows } from './relational-rows.js';
import { RelationalType, relationalType } from './relational-tables.js';

/** A table sink's tables compared with the read model at the target's cursor. */
export interface TableVerification {
  sink_id: string;
  kind: string;
  /** The target's cursor of the sink (null: it has written nothing yet). */
  cursor: string | null;
  equal: boolean;
  types: TypeComparison[];
}

/** Why a sink cannot be verified: a usage error (2) or a failure (1), its message free of secrets. */
export class TableVerifyError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
  ) {
    super(message);
  }
}

/**
 * `menu-sync sinks verify` (docs/reference.md §12), of either layout: reads the sink's cursor and tables in one
 * snapshot of the target, and the newest live change of each resource up to that cursor from the
 * daemon's change log, and compares them type by type. With `repair`, rewrites what differs (the
 * rows missing or changed, the rows not live removed) in one target transaction with the sink's
 * cursor locked, then compares again.
 */
export async function verifyTableSink(
  sink: Sink,
  defaultTypes: readonly string[],
  deps: { repository: TableVerifyRepository; guard: EgressGuard },
  repair: boolean,
): Promise<{ before: TableVerification; after: TableVerification | null }> {
  if (!isTableKind(sink.kind))
    throw new TableVerifyError(`sinks verify compares a table sink's tables; ${sink.id} is a ${sink.kind} sink`, 2);
  if (sink.targetUrl === null)
    throw new TableVerifyError('the sink URL cannot be opened with the current TOKEN_ENCRYPTION_KEY; PATCH its url', 1);
  const target = parseTableUrl(sink.kind, sink.targetUrl);
  if (typeof target === 'string') throw new TableVerifyError(target, 1);
  const types = (sink.types ?? defaultTypes).filter((type) => SPEC[type] !== undefined);
  const prefix = sink.kind === 'mysql' ? (sink.tablePrefix ?? DEFAULT_TABLE_PREFIX) : '';
  const tables = sinkTables(types, prefix);
  const plans = types.map((type) =>
    sink.layout === 'relational'
      ? relationalPlan(relationalType(type, prefix))
      : documentPlan(tables.tables.get(type)!),
  );
  const database = sink.kind === 'mysql' ? 'MySQL' : 'PostgreSQL';
  let opened: VerifyTarget | null = null;
  try {
    opened = await openVerifyTarget({
      target,
      resolve: () => deps.guard.resolveAllowed(target.host, target.port),
      timeoutMs: sink.timeoutMs,
      schema: sink.schema ?? DEFAULT_SCHEMA,
    });
    const compare = async () => {
      const read = await opened!.read(
        sink.id,
        plans.flatMap((plan) => plan.tables),
        sink.ownerIds,
      );
      const cursor = read.cursor ?? { cursor: START, epoch: 0 };
      const expected = await deps.repository.newestLive(cursor.cursor, types, sink.ownerIds);
      const compared = plans.flatMap((plan) => {
        const changes = expected.get(plan.type) ?? [];
        const rows = plan.rows(changes);
        return plan.tables.map((table) => ({
          plan,
          changes,
          comparison: compareRows(table, rows.get(table.name) ?? [], read.rows.get(table.name) ?? []),
        }));
      });
      const report: TableVerification = {
        sink_id: sink.id,
        kind: sink.kind,
        cursor: read.cursor === null ? null : encodeChangeCursor(read.cursor.cursor),
        equal: compared.every(({ comparison }) => comparison.equal),
        types: compared.map(({ comparison: { parents: _parents, ...type } }) => type),
      };
      return { report, cursor, compared };
    };
    const first = await compare();
    if (!repair || first.report.equal) return { before: first.report, after: null };
    const repairs = plans.map((plan): TableRepair => {
      const mine = first.compared.filter((entry) => entry.plan === plan);
      const differing = new Set(mine.flatMap(({ comparison }) => comparison.parents.map(keyText)));
      const changes = mine[0]?.changes ?? [];
      const rewrite = changes.filter((change) =>
        differing.delete(keyText({ owner_id: change.owner_id ?? '', id: change.id })),
      );
      const remove = [...differing].map((text) => {
        const [owner_id, id] = text.split('\u0000');
        return { owner_id, id };
      });
      return { ...plan.repair, rewrite, remove };
    });
    if (!(await opened.repair(sink.id, first.cursor, tables.tombstones.name, repairs)))
      throw new TableVerifyError("the sink's cursor moved while verifying: nothing repaired; run it again", 1);
    return { before: first.report, after: (await compare()).report };
  } catch (error) {
    if (error instanceof TableVerifyError) throw error;
    throw new TableVerifyError(describeDatabaseError(database, error, target.password).error, 1);
  } finally {
    await opened?.close().catch(() => undefined);
  }
}

const keyText = (key: RowKey) => `${key.owner_id}\u0000${key.id}`;

/** How one followed type is compared and repaired: its tables, the rows its changes give each, and how to rewrite them. */
interface TypePlan {
  type: string;
  tables: ComparedTable[];
  rows(changes: readonly Change[]): Map<string, Array<Record<string, unknown>>>;
  repair: Pick<TableRepair, 'main' | 'children' | 'layout'>;
}

function documentPlan(table: VerifiedTable): TypePlan {
  return {
    type: table.type,
    tables: [documentTable(table)],
    rows: (changes) => new Map([[table.name, changes.map((change) => documentRow(table, change))]]),
    repair: { main: table.name, children: [], layout: { kind: 'document', table } },
  };
}

function relationalPlan(spec: RelationalType): TypePlan {
  const main: ComparedTable = {
    type: spec.type,
    name: spec.table.name,
    columns: spec.table.columns.filter((column) => column.name !== 'synced_at'),
    key: ['owner_id', 'id'],
    parent: 'id',
  };
  const children = spec.children.map((child): ComparedTable => ({
    type: spec.type,
    name: child.table.name,
    columns: child.table.columns,
    key: child.table.primaryKey,
    parent: child.parent,
  }));
  return {
    type: spec.type,
    tables: [main, ...children],
    rows: (changes) => {
      const rows = new Map<string, Array<Record<string, unknown>>>(
        [main, ...children].map((table) => [table.name, []]),
      );
      for (const change of changes) {
        const written = relationalRows(spec, change);
        rows.get(main.name)!.push(written.row);
        for (const [name, childRows] of written.children) rows.get(name)!.push(...childRows);
      }
      return rows;
    },
    repair: {
      main: main.name,
      children: children.map((child) => ({ name: child.name, parent: child.parent })),
      layout: { kind: 'relational', spec },
    },
  };
}
