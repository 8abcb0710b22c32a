// The daemon's own SQL for the hot reads, taken from dist/ (so that the baseline server and the
// EXPLAIN snapshots run exactly what the daemon runs): the `as_of` statement is captured by handing
// the read-model repository a data source that records the query instead of running it.
import { AS_OF_SESSION_SETTINGS, ReadModelRepository } from '../../dist/src/query/read-model.repository.js';
import { RESOURCE_TABLES } from '../../dist/src/projection/resource-tables.js';

/**
 * The products `as_of` statement for a filter ({ ownerId, ids, includeDeleted, limit, afterSortKey, asOf }):
 * { sql, params, name }, `name` being the prepared statement's under which the daemon runs it (on
 * sessions with `plan_cache_mode = force_generic_plan`, GENERIC_PLANS).
 */
export async function asOfStatement(filter) {
  const captured = [];
  const record = (sql, params, name) => {
    captured.push({ sql, params, name });
    return Promise.resolve([]);
  };
  // The repository queries through TypeORM's data source or, for the hot reads, its pg pool (the
  // as_of statements as prepared statements: a config object with their name).
  const pooled = async (sql, params) => ({
    rows: await (typeof sql === 'object' ? record(sql.text, sql.values, sql.name) : record(sql, params)),
  });
  const recorder = { query: record, driver: { master: { query: pooled } } };
  const repository = new ReadModelRepository(recorder);
  // The menu as_of statements run on a pool of their own (sessions that plan them generically):
  // recorded the same way.
  Object.defineProperty(repository, 'asOfPool', { value: recorder.driver.master });
  // One statement (the ids past the checkpoint are found inside it).
  await repository.find(RESOURCE_TABLES.product, filter);
  return captured.at(-1);
}

/** The startup options under which the daemon runs its menu `as_of` statements (ReadModelRepository.asOfPool). */
export const GENERIC_PLANS = Object.entries(AS_OF_SESSION_SETTINGS)
  .map(([name, value]) => `-c ${name}=${value}`)
  .join(' ');
