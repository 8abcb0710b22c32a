import { Logger } from '@nestjs/common';
import pg from 'pg';
import { useDatabase } from '../../test/support/database.js';
import { ChannelListener } from '../database/channel-listener.js';
import { APPENDED_CHANNEL, AppendSignal } from './append-signal.js';

/**
 * A projector in another process hears of appends through AppendSignal's NOTIFY and a
 * ChannelListener's LISTEN, against the real PostgreSQL.
 */
describe('AppendSignal and ChannelListener', () => {
  const db = useDatabase(4);
  const logger = new Logger('append-signal.int-spec');

  /** A plain client listening on the channel, counting notifications. */
  async function listen(): Promise<{ count: () => number; end: () => Promise<void> }> {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    let count = 0;
    client.on('notification', () => count++);
    await client.query(`LISTEN ${APPENDED_CHANNEL}`);
    return { count: () => count, end: () => client.end() };
  }

  const until = async (check: () => boolean, ms = 5000) => {
    const deadline = Date.now() + ms;
    while (!check()) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };

  const listeners = async (): Promise<number> => {
    const [row] = await db.dataSource.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'menu-sync listen'`,
    );
    return row.n;
  };

  it('notifies after appends where no projector projects, coalescing a burst into at most two; not at all where one does', async () => {
    const heard = await listen();
    try {
      const signal = new AppendSignal(db.dataSource);
      for (let i = 0; i < 5; i++) signal.onAppended();
      await until(() => heard.count() >= 1);
      await new Promise((resolve) => setTimeout(resolve, 300));
      // One sent at once; the four appends during it get one more when it ends.
      expect(heard.count()).toBe(2);

      signal.projectingHere = true;
      signal.onAppended();
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(heard.count()).toBe(2);
    } finally {
      await heard.end();
    }
  });

  it('a ChannelListener calls its subscribers on each notification, listens again after its connection is cut, and closes when the last leaves', async () => {
    const listener = new ChannelListener(db.dataSource, APPENDED_CHANNEL, logger);
    let calls = 0;
    const unsubscribe = listener.subscribe(() => calls++);
    try {
      // Notified until heard: the LISTEN may not be in place yet.
      await untilHeard(() => calls >= 1);
      expect(await listeners()).toBe(1);

      await db.dataSource.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'menu-sync listen'`,
      );
      const before = calls;
      await untilHeard(() => calls > before, 10000);
      expect(await listeners()).toBe(1);
    } finally {
      unsubscribe();
    }
    await untilAsync(async () => (await listeners()) === 0);
  });

  async function untilHeard(check: () => boolean, ms = 5000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!check()) {
      if (Date.now() > deadline) throw new Error('not heard');
      await db.dataSource.query(`SELECT pg_notify($1, '')`, [APPENDED_CHANNEL]);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async function untilAsync(check: () => Promise<boolean>, ms = 5000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
});
