import { createHash } from 'node:crypto';
import { useDatabase } from '../../test/support/database.js';
import { QuarantineRepository } from './quarantine.repository.js';

const DAY = 86_400_000;

describe('QUARANTINE_RETENTION: QuarantineRepository.prune (PostgreSQL)', () => {
  const db = useDatabase();

  it('deletes the entries received before the cutoff, and only those', async () => {
    const repository = new QuarantineRepository(db.dataSource);
    const now = Date.now();
    for (const [daysAgo, reason] of [
      [40, 'old'],
      [31, 'older than 30 days'],
      [29, 'kept'],
      [0, 'new'],
    ] as const) {
      const body = Buffer.from(`{"reason":"${reason}"}`);
      await repository.add(
        {
          receivedAt: new Date(now - daysAgo * DAY),
          status: 400,
          reason,
          field: null,
          keyId: null,
          contentType: 'application/json',
          sha256: createHash('sha256').update(body).digest(),
          body,
          ownerId: null,
        },
        1000,
      );
    }
    expect(await repository.prune(new Date(now - 30 * DAY))).toBe(2);
    expect((await repository.list({ after: 0, limit: 10 })).map((entry) => entry.reason)).toEqual(['kept', 'new']);
    expect(await repository.prune(new Date(now - 30 * DAY))).toBe(0);
  });
});
