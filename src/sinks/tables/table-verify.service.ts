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
import { compareTable, TypeComparison } from './table-verify.js';

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
 * `menu-sync sinks verify` (docs/reference.md §12): reads the sink's cursor and tables in one
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
  if ((sink.layout ?? 'document') !== 'document')
    throw new TableVerifyError(`sinks verify compares the document layout only; ${sink.id} is relational`, 2);
  if (sink.targetUrl === null)
    throw new TableVerifyError('the sink URL cannot be opened with the current TOKEN_ENCRYPTION_KEY; PATCH its url', 1);
  const target = parseTableUrl(sink.kind, sink.targetUrl);
  if (typeof target === 'string') throw new TableVerifyError(target, 1);
  const types = (sink.types ?? defaultTypes).filter((type) => SPEC[type] !== undefined);
  const tables = sinkTables(types, sink.kind === 'mysql' ? (sink.tablePrefix ?? DEFAULT_TABLE_PREFIX) : '');
  const database = sink.kind === 'mysql' ? 'MySQL' : 'PostgreSQL';
  let opened: VerifyTarget | null = null;
  try {
    opened = await openVerifyTarget({
      target,
      resolve: () => deps.guard.resolveAllowed(target.host, target.port),
      timeoutMs: sink.timeoutMs,
      schema: sink.schema ?? DEFAULT_SCHEMA,
    });
    const verifiedTables = [...tables.tables.values()];
    const compare = async () => {
      const read = await opened!.read(sink.id, verifiedTables, sink.ownerIds);
      const cursor = read.cursor ?? { cursor: START, epoch: 0 };
      const expected = await deps.repository.newestLive(cursor.cursor, types, sink.ownerIds);
      const compared = verifiedTables.map((table) =>
        compareTable(table, expected.get(table.type) ?? [], read.rows.get(table.name) ?? []),
      );
      const report: TableVerification = {
        sink_id: sink.id,
        kind: sink.kind,
        cursor: read.cursor === null ? null : encodeChangeCursor(read.cursor.cursor),
        equal: compared.every((type) => type.equal),
        types: compared,
      };
      return { report, cursor, expected };
    };
    const first = await compare();
    if (!repair || first.report.equal) return { before: first.report, after: null };
    const repairs: TableRepair[] = first.report.types
      .filter((type) => !type.equal)
      .map((type) => {
        const table: VerifiedTable = tables.tables.get(type.type)!;
        const differing = new Set([...type.missing, ...type.changed].map((key) => `${key.owner_id}\u0000${key.id}`));
        const write = (first.expected.get(type.type) ?? []).filter((change) =>
          differing.has(`${change.owner_id ?? ''}\u0000${change.id}`),
        );
        return { table, write, remove: type.extra };
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
