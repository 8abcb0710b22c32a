// The daemon's own SQL for the hot reads, taken from dist/ (so that the baseline server and the
// EXPLAIN snapshots run exactly what the daemon runs): the `as_of` statement is captured by handing
// the read-model repository a data source that records the query instead of running it.
import { ReadModelRepository } from '../../dist/src/query/read-model.repository.js';
import { RESOURCE_TABLES } from '../../dist/src/projection/resource-tables.js';

/** The products `as_of` statement for a filter ({ ownerId, ids, includeDeleted, limit, afterSortKey, asOf }). */
export async function asOfStatement(filter) {
  const captured = [];
  const record = (sql, params) => { captured.push({ sql, params }); return Promise.resolve([]); };
  // The repository queries through TypeORM's data source or, for the hot reads, its pg pool.
  const recorder = { query: record, driver: { master: { query: async (sql, params) => ({ rows: await record(sql, params) }) } } };
  // The first statements look up ids past the checkpoint (none here); the last is the page's.
  await new ReadModelRepository(recorder).find(RESOURCE_TABLES.product, filter);
  return captured.at(-1);
}
