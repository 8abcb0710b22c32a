import { setTimeout as sleep } from 'node:timers/promises';
import { insertChanges } from '../../test/support/change-log-factory.js';
import { useDatabase } from '../../test/support/database.js';
import { ReadReplicaRepository } from '../database/read-replica.repository.js';
import { ReadRouter } from '../database/read-router.service.js';
import { CHANGES_CHANNEL } from '../projection/published-changes.js';
import { ChangePosition, ChangeText, START } from './change.js';
import { ChangeLogRepository } from './change-log.repository.js';
import { ChangeNotifier } from './change-notifier.service.js';
import { ChangeRouter, RouteFilter } from './change-router.service.js';

describe('ChangeRouter (PostgreSQL): one read per page, each change to the consumers its owner and type select', () => {
  const db = useDatabase(6);
  let changes: ChangeLogRepository;
  let notifier: ChangeNotifier;
  let router: ChangeRouter;

  beforeAll(() => {
    changes = new ChangeLogRepository(db.dataSource);
    notifier = new ChangeNotifier(
      db.dataSource,
      changes,
      new ReadRouter(null as unknown as ReadReplicaRepository, null),
      null,
    );
    router = new ChangeRouter(changes, notifier);
  });

  afterAll(async () => {
    router.beforeApplicationShutdown();
    await notifier.beforeApplicationShutdown();
    await changes.onApplicationShutdown();
  });

  /** Writes changes as the projector does and tells the notifier (the projector's page NOTIFYs). */
  async function write(inputs: Array<{ owner: string; id: string; type?: string }>): Promise<void> {
    await insertChanges(
      db.url,
      inputs.map(({ owner, id, type }) => ({ type: type ?? 'product', id, ownerId: owner })),
    );
    await db.dataSource.query(`SELECT pg_notify('${CHANGES_CHANNEL}', '')`);
  }

  /** A consumer that records what it is handed, as `owner/id`. */
  function consumer() {
    const got: ChangeText[] = [];
    return {
      got,
      ids: () => got.map((change) => `${change.ownerId}/${change.id}`),
      deliver: (c: readonly ChangeText[]) => got.push(...c),
    };
  }

  async function joinWhenStarted(filter: RouteFilter, from: ChangePosition, c: ReturnType<typeof consumer>) {
    for (let i = 0; i < 100; i++) {
      const route = router.join(filter, from, c);
      if (route !== null) return route;
      await sleep(20);
    }
    throw new Error('the router did not start');
  }

  async function until(check: () => boolean): Promise<void> {
    for (const deadline = Date.now() + 5000; !check() && Date.now() < deadline;) await sleep(20);
  }

  it('hands each consumer the changes of its owners and types only, in reader order; one of every owner gets all', async () => {
    await write([{ owner: 'a', id: 'before' }]);
    const head = await changes.readablePosition();
    const [a, ab, collectionsOfB, all] = [consumer(), consumer(), consumer(), consumer()];
    const routes = [
      await joinWhenStarted({ ownerIds: ['a'] }, head, a),
      await joinWhenStarted({ ownerIds: ['a', 'b'] }, head, ab),
      await joinWhenStarted({ ownerIds: ['b'], types: ['collection'] }, head, collectionsOfB),
      await joinWhenStarted({}, head, all),
    ];
    expect(router.consumers).toBe(4);
    await write([
      { owner: 'a', id: '1' },
      { owner: 'b', id: '2' },
      { owner: 'c', id: '3' },
      { owner: 'b', id: '4', type: 'collection' },
      { owner: 'a', id: '5' },
    ]);
    await until(() => all.got.length === 5);
    expect(a.ids()).toEqual(['a/1', 'a/5']);
    expect(ab.ids()).toEqual(['a/1', 'b/2', 'b/4', 'a/5']);
    expect(collectionsOfB.ids()).toEqual(['b/4']);
    expect(all.ids()).toEqual(['a/1', 'b/2', 'c/3', 'b/4', 'a/5']);
    expect(routes[0].position).toEqual(all.got[4].position);
    for (const route of routes) route.close();
    expect(router.consumers).toBe(0);
  });

  it('joins a consumer from behind the head with what it missed, one ahead of it without a change twice, and none from before what it keeps', async () => {
    const c0 = consumer();
    const first = await joinWhenStarted({ ownerIds: ['x'] }, await changes.readablePosition(), c0);
    await write([
      { owner: 'x', id: '1' },
      { owner: 'x', id: '2' },
      { owner: 'x', id: '3' },
    ]);
    await until(() => c0.got.length === 3);
    // Behind: it had read up to x/1 on its own.
    const behind = consumer();
    const joined = router.join({ ownerIds: ['x'] }, c0.got[0].position, behind)!;
    expect(behind.ids()).toEqual(['x/2', 'x/3']);
    // Ahead: it had read further than the router (up to a change not yet routed).
    await write([{ owner: 'x', id: '4' }]);
    const [four] = (await changes.readTextsAfter(c0.got[2].position, { limit: 10, ownerIds: ['x'] })).changes;
    const ahead = consumer();
    const early = router.join({ ownerIds: ['x'] }, four.position, ahead);
    await write([{ owner: 'x', id: '5' }]);
    await until(() => c0.got.length === 5);
    expect(early).not.toBeNull();
    expect(ahead.ids()).toEqual(['x/5']);
    expect(behind.ids()).toEqual(['x/2', 'x/3', 'x/4', 'x/5']);
    // From the start of the log: older than anything kept, so it reads on its own.
    expect(router.join({ ownerIds: ['x'] }, START, consumer())).toBeNull();
    for (const route of [first, joined, early]) route?.close();
    expect(router.consumers).toBe(0);
  });

  it('reads again when a read saw less than the notifier was woken for (a held-back horizon), with no next change to wake it', async () => {
    // The horizon of one statement can be held back by another database's transaction ending
    // between its snapshot and its look at pg_stat_activity; here the first reads after a wake
    // answer as such a statement would: nothing after the cursor.
    class HeldBack extends ChangeLogRepository {
      held = 0;
      override async readTextsAfter(
        after: ChangePosition,
        filter: Parameters<ChangeLogRepository['readTextsAfter']>[1],
      ) {
        const page = await super.readTextsAfter(after, filter);
        if (this.held === 0 || page.changes.length === 0) return page;
        this.held--;
        return { ...page, changes: [], next: after };
      }
    }
    const heldBack = new HeldBack(db.dataSource);
    const own = new ChangeRouter(heldBack, notifier);
    try {
      const c = consumer();
      let route = null;
      for (let i = 0; i < 100 && route === null; i++) {
        route = own.join({ ownerIds: ['held'] }, await changes.readablePosition(), c);
        if (route === null) await sleep(20);
      }
      heldBack.held = 2;
      await write([{ owner: 'held', id: '1' }]);
      await until(() => c.got.length === 1);
      expect([heldBack.held, c.ids()]).toEqual([0, ['held/1']]);
      route?.close();
    } finally {
      own.beforeApplicationShutdown();
      await heldBack.onApplicationShutdown();
    }
  });
});
