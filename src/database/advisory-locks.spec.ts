import { LOCK_SPACES, SINGLE_LOCKS, advisoryLocks, lockQuery, pgLocksMatch } from './advisory-locks.js';

describe('the advisory-lock registry', () => {
  it('gives every lock and every lock space a number of its own', () => {
    const numbers = [...Object.values(SINGLE_LOCKS), ...Object.values(LOCK_SPACES)];
    expect(new Set(numbers).size).toBe(numbers.length);
  });

  it('keeps the single keys out of the range of the second keys used in spaces (projections, connection ids stay small)', () => {
    for (const key of Object.values(SINGLE_LOCKS)) expect(key).toBeGreaterThan(1_000_000);
    for (const space of Object.values(LOCK_SPACES)) expect(space).toBeLessThan(2 ** 31);
  });

  it('writes the call for one key and for a (space, key) pair', () => {
    expect(lockQuery('pg_try_advisory_lock', advisoryLocks.single('projector'))).toEqual([
      'SELECT pg_try_advisory_lock($1::bigint) AS result',
      [SINGLE_LOCKS.projector],
    ]);
    expect(lockQuery('pg_advisory_xact_lock', advisoryLocks.inSpace('connectionRefresh', 7))).toEqual([
      'SELECT pg_advisory_xact_lock($1::int, $2::int) AS result',
      [LOCK_SPACES.connectionRefresh, 7],
    ]);
    expect(pgLocksMatch(advisoryLocks.inSpace('rebuild', 1), 2)[0]).toBe(
      'l.classid = $2 AND l.objid = $3 AND l.objsubid = 2',
    );
  });
});
