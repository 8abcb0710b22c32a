import { randomUUID } from 'node:crypto';
import { useDatabase } from '../../test/support/database.js';
import { ServiceUnavailableError } from '../common/app-error.js';
import { ApiTokenRepository } from './api-token.repository.js';
import { newTokenSecret, tokenDigest } from './token-secret.js';
import { LAST_USED_EVERY_MS, TOKENS_STALE_MS, TokenStore } from './token-store.js';

/** The tokens every guard of a process reads, against the real PostgreSQL and migrations. */
describe('TokenStore', () => {
  const db = useDatabase(4);
  let repository: ApiTokenRepository;
  let store: TokenStore;

  beforeAll(() => {
    repository = new ApiTokenRepository(db.dataSource);
    store = new TokenStore(db.dataSource, repository);
  });
  afterAll(() => store.onApplicationShutdown());

  const add = async (expiresAt: Date | null = null) => {
    const secret = newTokenSecret();
    const id = randomUUID();
    await repository.insert({
      id,
      name: `t-${id}`,
      role: 'read',
      ownerIds: ['o1'],
      digest: tokenDigest(secret),
      expiresAt,
    });
    return { id, digest: tokenDigest(secret) };
  };
  const lastUsed = async (id: string) =>
    (
      (await db.dataSource.query(`SELECT last_used_at FROM api_tokens WHERE id = $1`, [id])) as Array<{
        last_used_at: Date | null;
      }>
    )[0].last_used_at;

  it('counts as holding tokens until first read, then knows none; finds a token by its digest once read', async () => {
    expect(store.any).toBe(true);
    await store.onApplicationBootstrap();
    expect(store.any).toBe(false);
    const token = await add();
    await store.refresh();
    expect(store.any).toBe(true);
    expect(store.principal(token.digest, Date.now())).toEqual({
      role: 'read',
      ownerIds: ['o1'],
      id: token.id,
      name: `t-${token.id}`,
    });
    expect(store.principal(tokenDigest('mst_not-one-of-them'), Date.now())).toBeUndefined();
  });

  it('refuses a token from its expires_at on, by the clock, without reading again', async () => {
    const expiresAt = new Date(Date.now() + 1000);
    const token = await add(expiresAt);
    await store.refresh();
    expect(store.principal(token.digest, expiresAt.getTime() - 1)).toMatchObject({ id: token.id });
    expect(store.principal(token.digest, expiresAt.getTime())).toBeUndefined();
  });

  it('hears of a removal by NOTIFY, well before the poll', async () => {
    const token = await add();
    await store.refresh();
    await db.dataSource.query(`DELETE FROM api_tokens WHERE id = $1`, [token.id]);
    const at = Date.now();
    while (store.principal(token.digest, Date.now()) !== undefined) {
      if (Date.now() - at > 1500) throw new Error('not told within 1.5 s');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  });

  it('notes last_used_at once a minute at most, off the call', async () => {
    const token = await add();
    await store.refresh();
    const now = Date.now();
    store.principal(token.digest, now);
    for (let tries = 0; (await lastUsed(token.id)) === null && tries < 100; tries++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await lastUsed(token.id))?.getTime()).toBe(now);
    store.principal(token.digest, now + 1);
    store.principal(token.digest, Date.now());
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await lastUsed(token.id))?.getTime()).toBe(now);
    expect(LAST_USED_EVERY_MS).toBe(60_000);
  });

  it('answers 503 for a stored token when its last read is too old to tell a revoked one', async () => {
    const token = await add();
    await store.refresh();
    expect(() => store.principal(token.digest, Date.now() + TOKENS_STALE_MS + 1000)).toThrow(ServiceUnavailableError);
  });
});
