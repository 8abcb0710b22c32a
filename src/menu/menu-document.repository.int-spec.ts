import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource, TestDatabase } from '../../test/support/database.js';
import { eventually } from '../../test/support/eventually.js';
import { MenuDocumentRepository } from './menu-document.repository.js';

/**
 * A `/menu` being built asks PostgreSQL for each chunk only once `giveWay` lets it (the daemon's
 * gives way to webhook deliveries in flight): the build's database work waits too, not only its
 * writing out.
 */
describe('MenuDocumentRepository.open (PostgreSQL)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let repository: MenuDocumentRepository;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url, 2);
    // 450 products: three chunks of the products cursor (200 rows a fetch).
    await dataSource.query(`
      INSERT INTO proj_menu.products (id, owner_id, attributes, deleted, occurred_at, event_seq, event_id, position)
      SELECT n::text, 'gate-owner', jsonb_build_object('title', 'Product ' || n), false, now(), 0, 'e' || n, n
        FROM generate_series(1, 450) n`);
    repository = new MenuDocumentRepository(dataSource);
  });

  afterAll(async () => {
    await repository.onApplicationShutdown();
    await dataSource.destroy();
    await database.drop();
  });

  it('fetches each chunk of a section only after giveWay resolves, one at a time, and the document is whole', async () => {
    const gates: Array<() => void> = [];
    const giveWay = () => new Promise<void>((resolve) => gates.push(resolve));
    const snapshot = await repository.open('gate-owner', 'normalized', undefined, giveWay);
    const chunks: string[] = [];
    const reading = (async () => {
      for await (const chunk of snapshot.chunks) chunks.push(chunk.toString());
    })();
    const settle = () => new Promise((resolve) => setTimeout(resolve, 100));
    const productsRead = () => chunks.join('').split('"Product ').length - 1;
    await settle();
    // The collections' first fetch waits: nothing past the section's opening.
    expect(gates).toHaveLength(1);
    expect(chunks).toEqual(['{"collections":[']);
    // Releases: collections (no rows), products 200, 200, 50 (a short chunk ends the section), traits, trait options.
    const seen: Array<{ pending: number; products: number }> = [];
    for (let released = 0; released < gates.length; released++) {
      gates[released]();
      await settle();
      seen.push({ pending: gates.length - released - 1, products: productsRead() });
    }
    await reading;
    expect(seen).toEqual([
      { pending: 1, products: 0 },
      { pending: 1, products: 200 },
      { pending: 1, products: 400 },
      { pending: 1, products: 450 },
      { pending: 1, products: 450 },
      { pending: 0, products: 450 },
    ]);
    expect(JSON.parse(chunks.join('')).products).toHaveLength(450);
  });

  it('builds on sessions of its own, the next build on the session the last one used, ended at shutdown', async () => {
    const own = new MenuDocumentRepository(dataSource);
    const build = async () => {
      const snapshot = await own.open(
        'gate-owner',
        'expanded',
        async (db) =>
          (await db.query(`SELECT pg_backend_pid() AS pid, current_setting('application_name') AS name`))[0],
      );
      let text = '';
      for await (const chunk of snapshot.chunks) text += chunk.toString();
      const { pid, name } = snapshot.trailer as { pid: number; name: string };
      return { pid, name, products: (JSON.parse(text) as { products: unknown[] }).products.length };
    };
    const seen = new Set<number>();
    const alive = async () =>
      (
        await dataSource.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1::int[])`, [
          [...seen],
        ])
      )[0].n as number;
    try {
      const first = await build();
      expect(first).toMatchObject({ name: 'menu-sync menu', products: 450 });
      // Two builds at once take two sessions; the shared pool's sessions are busy in between.
      const [a, b] = await Promise.all([build(), build()]);
      expect(a.pid).not.toBe(b.pid);
      await Promise.all([1, 2].map(() => dataSource.query('SELECT pg_sleep(0.05)')));
      // The session released last is handed out first.
      const after = await build();
      expect([a.pid, b.pid]).toContain(after.pid);
      expect((await build()).pid).toBe(after.pid);
      for (const { pid } of [first, a, b, after]) seen.add(pid);
      expect(seen.size).toBe(2);
      expect(await alive()).toBe(2);
    } finally {
      await own.onApplicationShutdown();
    }
    // A backend leaves pg_stat_activity a moment after its client closed the socket.
    await eventually(async () => expect(await alive()).toBe(0));
  });
});
