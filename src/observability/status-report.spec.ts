import { needsAttention, StatusSnapshot } from './status-report.js';

const calm = (): StatusSnapshot => ({
  at: new Date('2026-01-01T00:00:00Z'),
  connections: [
    {
      id: 1,
      state: 'active',
      ownerId: '7',
      sandbox: false,
      expiresAt: new Date('2026-01-01T02:00:00Z'),
      lastError: null,
      subscriptions: 1,
      failedSubscriptions: 0,
    },
  ],
  projections: [{ name: 'menu', position: 10, head: 12, lag: 2, parked: 0, lastError: null }],
  later: [{ name: 'menu', position: 12, lag: 0 }],
  sinks: [{ id: '1', kind: 'http', state: 'retrying', lastError: 'HTTP 503' }],
  lastReconcile: { id: 3, trigger: 'schedule', outcome: 'ok', startedAt: '2026-01-01T00:00:00Z', errors: [] },
  quarantined: 4,
});

describe('needsAttention', () => {
  const thresholds = { lagEvents: 100 };

  it('is empty when all is well (a retrying sink and a shrinking lag are not faults)', () => {
    expect(needsAttention(calm(), thresholds)).toEqual([]);
  });

  it('names a failing sink, a failed reconcile, a failed subscription', () => {
    const snapshot = calm();
    snapshot.sinks = [{ id: '9', kind: 'nats', state: 'failing', lastError: 'no responders' }];
    snapshot.lastReconcile!.outcome = 'failed';
    snapshot.connections[0].failedSubscriptions = 1;
    expect(needsAttention(snapshot, thresholds)).toEqual([
      'connection 1: 1 webhook subscription(s) failed to register',
      'sink 9 failing: no responders',
      'last reconcile run (#3) failed',
    ]);
  });

  it('names a connection needing reauthorization, but not a sandbox connection retired for a newer emulator', () => {
    const snapshot = calm();
    snapshot.connections.push(
      { ...snapshot.connections[0], id: 2, state: 'reauthorization_required', lastError: 'invalid_grant' },
      {
        ...snapshot.connections[0],
        id: 3,
        state: 'reauthorization_required',
        sandbox: true,
        lastError: 'its sandbox emulator has stopped',
      },
    );
    expect(needsAttention(snapshot, thresholds)).toEqual(['connection 2 needs reauthorization: invalid_grant']);
  });

  it('lag: growing while the position stands, or at the threshold', () => {
    const stuck = calm();
    stuck.later = [{ name: 'menu', position: 10, lag: 5 }];
    expect(needsAttention(stuck, thresholds)).toEqual([
      'projection menu: lag growing (2 → 5) and the projector is not moving',
    ]);
    const moving = calm();
    moving.later = [{ name: 'menu', position: 11, lag: 5 }];
    expect(needsAttention(moving, thresholds)).toEqual([]);
    expect(needsAttention(moving, { lagEvents: 5 })).toEqual(['projection menu: lag 5 events (threshold 5)']);
  });
});
