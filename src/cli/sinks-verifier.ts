import type { AppConfig } from '../config/app-config.js';
import { SecretCipher } from '../common/secret-cipher.js';
import { EgressGuard } from '../sinks/egress/egress-guard.js';
import { SinkListing } from '../sinks/sink-listing.repository.js';
import { SinkRepository } from '../sinks/sink.repository.js';
import { TableVerifyRepository } from '../sinks/tables/table-verify.repository.js';
import { TableVerification, TableVerifyError, verifyTableSink } from '../sinks/tables/table-verify.service.js';
import type { RowKey, TypeComparison } from '../sinks/tables/table-verify.js';
import { withDaemonDataSource } from './daemon-database.js';
import { formatTable } from './output.js';
import { resolveSinkId, SinkCommandError } from './sinks-client.js';

/** Ids listed per kind of difference in the text output (`--json` lists them all). */
const SHOWN_IDS = 20;

/**
 * `sinks verify` on the daemon's database (never migrating) and the sink's target, reached through
 * the egress guard of this process's configuration.
 */
export async function verifySink(
  config: AppConfig,
  given: string,
  repair: boolean,
): Promise<{ before: TableVerification; after: TableVerification | null }> {
  const cipher = await SecretCipher.create(config);
  return withDaemonDataSource(
    config,
    2,
    async (dataSource) => {
      const sinks = new SinkRepository(dataSource, cipher);
      try {
        const id = await resolveSinkId(
          {
            startingWith: async (prefix) =>
              (await new SinkListing(dataSource, cipher).page({ limit: 1000, order: 'created', q: prefix })).map(
                ({ sink }) => ({
                  id: sink.id,
                }),
              ),
          },
          given,
        );
        const sink = await sinks.find(id);
        if (sink === null) throw new SinkCommandError(`No sink ${given}.`, 1);
        return await verifyTableSink(
          sink,
          config.changeTypes,
          { repository: new TableVerifyRepository(dataSource), guard: new EgressGuard(config) },
          repair,
        );
      } catch (error) {
        if (error instanceof TableVerifyError) throw new SinkCommandError(error.message, error.exitCode);
        throw error;
      } finally {
        await sinks.onApplicationShutdown();
      }
    },
    { migrate: false },
  );
}

const keys = (list: RowKey[]) =>
  list.length === 0
    ? '-'
    : `${list
        .slice(0, SHOWN_IDS)
        .map((key) => `${key.owner_id}/${key.id}`)
        .join(', ')}${list.length > SHOWN_IDS ? `, … (${list.length})` : ''}`;

/** One row a type (rows and digest of each side), then per table that differs the ids. */
export function formatVerification(report: TableVerification): string {
  const table = formatTable(
    ['TYPE', 'TABLE', 'API ROWS', 'API DIGEST', 'TABLE ROWS', 'TABLE DIGEST', 'RESULT'],
    report.types.map((type) => [
      type.type,
      type.table,
      String(type.api.rows),
      type.api.digest,
      String(type.target.rows),
      type.target.digest,
      type.equal ? 'equal' : 'differs',
    ]),
  );
  const differing = report.types
    .filter((type) => !type.equal)
    .map(
      (type: TypeComparison) =>
        `${type.table}: missing ${keys(type.missing)}; changed ${keys(type.changed)}; extra ${keys(type.extra)}\n`,
    );
  const verdict = report.equal ? 'equal to the API' : 'differs from the API';
  return `sink ${report.sink_id} (${report.kind}) at cursor ${report.cursor ?? 'none'}: ${verdict}\n${table}${differing.join('')}`;
}
