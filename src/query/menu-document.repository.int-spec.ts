import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource, TestDatabase } from '../../test/support/database.js';
import { MenuDocumentRepository } from './menu-document.repository.js';

/**
 * A `/menu` being built asks PostgreSQL for each chunk only once `giveWay` lets it (the daemon's
 * gives way to webhook deliveries in flight): the build's database work waits too, not only its
 * writing out.
 */
describe('MenuDocumentRepository.open (PostgreSQL)', () => {
  let database: TestDatabase;
  let dataSource: DataSource;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = await openDataSource(database.url, 2);
    // 450 products: three chunks of the products cursor (200 rows a fetch).
    await dataSource.query(`
      INSERT INTO proj_menu.products (id, owner_id, attributes, deleted, occurred_at, event_seq, event_id, position)
      SELECT n::text, 'gate-owner', jsonb_build_object('title', 'Product ' || n), false, now(), 0, 'e' || n, n
        FROM generate_series(1, 450) n`);
  });

  afterAll(async () => {
    await dataSource.destroy();
    await database.drop();
  });

  it('fetches each chunk of a section only after giveWay resolves, one at a time, and the document is whole', async () => {
    const gates: Array<() => void> = [];
    const giveWay = () => new Promise<void>((resolve) => gates.push(resolve));
    const snapshot = await new MenuDocumentRepository(dataSource).open('gate-owner', 'normalized', undefined, giveWay);
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
      { pending: 1, products: 0 }, { pending: 1, products: 200 }, { pending: 1, products: 400 }, { pending: 1, products: 450 },
      { pending: 1, products: 450 }, { pending: 0, products: 450 },
    ]);
    expect(JSON.parse(chunks.join('')).products).toHaveLength(450);
  });
});
