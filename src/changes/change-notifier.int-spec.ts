import { setTimeout as sleep } from 'node:timers/promises';
import { insertChanges, sqlQuery } from '../../test/support/change-log-factory.js';
import { useDatabase } from '../../test/support/database.js';
import { ReadRouter } from '../database/read-router.service.js';
import { ReadReplicaRepository } from '../database/read-replica.repository.js';
import { CHANGES_CHANNEL } from '../projection/published-changes.js';
import { ChangeLogRepository } from './change-log.repository.js';
import { ChangeNotifier } from './change-notifier.service.js';

describe('ChangeNotifier (PostgreSQL): a move of the readable head is never lost to a reader', () => {
  const db = useDatabase(4);
  let notifier: ChangeNotifier;

  beforeAll(() => {
    const router = new ReadRouter(null as unknown as ReadReplicaRepository, null);
    notifier = new ChangeNotifier(db.dataSource, new ChangeLogRepository(db.dataSource), router, null);
  });

  afterAll(async () => {
    await notifier.beforeApplicationShutdown();
  });

  /** Resolves to 'woken' when `wait` resolves within `ms`, else to 'timed out'. */
  const within = (wait: Promise<void>, ms: number) =>
    Promise.race([wait.then(() => 'woken'), sleep(ms, undefined, { ref: false }).then(() => 'timed out')]);

  it('a reader whose read overlapped a move waits for nothing; one that saw the move waits for the next', async () => {
    // The notifier listens from its first watcher on, and settles on the current head.
    const unwatch = notifier.watch(() => undefined);
    await sleep(1200);
    // The reader takes its mark, then reads; meanwhile a change commits and the notifier sees it.
    const seen = notifier.generation;
    await insertChanges(db.url, [{ type: 'product', id: '1', ownerId: 'a' }]);
    await sqlQuery(db.url, `SELECT pg_notify('${CHANGES_CHANNEL}', '')`);
    for (const deadline = Date.now() + 5000; notifier.generation === seen && Date.now() < deadline;) await sleep(10);
    expect(notifier.generation).toBe(seen + 1);
    // Its wait then, after the move, must not sleep out its 15 s.
    expect(await within(notifier.wait(15_000, undefined, seen), 1000)).toBe('woken');
    // A reader that read after that move waits until the next one.
    const after = notifier.generation;
    const waiting = notifier.wait(15_000, undefined, after);
    expect(await within(waiting, 300)).toBe('timed out');
    await insertChanges(db.url, [{ type: 'product', id: '2', ownerId: 'a' }]);
    await sqlQuery(db.url, `SELECT pg_notify('${CHANGES_CHANNEL}', '')`);
    expect(await within(waiting, 3000)).toBe('woken');
    unwatch();
  });
});
