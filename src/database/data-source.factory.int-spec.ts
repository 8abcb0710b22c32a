import pg from 'pg';
import { createTestDatabase } from '../../test/support/database.js';
import { eventually } from '../../test/support/eventually.js';
import { createDataSource } from './data-source.factory.js';
import { poolOfItsOwn } from './postgres-connection.js';

/**
 * How long the pools keep an idle session (DATABASE_POOL_IDLE_SECONDS): a session is kept past
 * pg's own 10 s default when told, closed after the given time otherwise, and the pools of their
 * own (ingress commits, menu `as_of`) keep the setting of the data source they come from.
 */
describe('dataSourceOptions idleSeconds', () => {
  const sessionsOf = async (watch: pg.Client, name: string) =>
    (
      await watch.query(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
        [name],
      )
    ).rows;

  it('closes idle sessions after idleSeconds, in the shared pool and in pools of their own', async () => {
    const database = await createTestDatabase();
    const dataSource = createDataSource({ url: database.url, poolSize: 2, idleSeconds: 1 });
    await dataSource.initialize();
    const own = poolOfItsOwn(dataSource, { application_name: 'menu-sync idle test', max: 1 });
    try {
      expect(own.options.idleTimeoutMillis).toBe(1000);
      await own.query('SELECT 1');
      const watch = new pg.Client({ connectionString: database.url, application_name: 'idle test watch' });
      await watch.connect();
      try {
        expect(await sessionsOf(watch, 'menu-sync idle test')).toHaveLength(1);
        expect((await sessionsOf(watch, 'menu-sync')).length).toBeGreaterThan(0);
        await eventually(async () => {
          expect(await sessionsOf(watch, 'menu-sync idle test')).toEqual([]);
          expect(await sessionsOf(watch, 'menu-sync')).toEqual([]);
        }, 8000);
      } finally {
        await watch.end();
      }
    } finally {
      await own.end();
      await dataSource.destroy();
      await database.drop();
    }
  });

  it("keeps an idle session for as long as told (the same backend answers after pg's default would have closed it)", async () => {
    const database = await createTestDatabase();
    const dataSource = createDataSource({ url: database.url, poolSize: 1, idleSeconds: 600 });
    await dataSource.initialize();
    try {
      const [{ pid }] = await dataSource.query('SELECT pg_backend_pid() AS pid');
      await new Promise((resolve) => setTimeout(resolve, 11_000));
      expect(await dataSource.query('SELECT pg_backend_pid() AS pid')).toEqual([{ pid }]);
    } finally {
      await dataSource.destroy();
      await database.drop();
    }
  }, 30_000);
});
