import { statusReport, StatusSnapshot, StatusThresholds } from './status-report.js';

const AT = new Date('2026-01-01T00:00:00Z');
const secondsBefore = (seconds: number) => new Date(AT.getTime() - seconds * 1000);

const calm = (): StatusSnapshot => ({
  at: AT,
  connections: [
    {
      id: 1,
      state: 'active',
      ownerId: '7',
      sandbox: false,
      expiresAt: new Date('2026-01-01T02:00:00Z'),
      lastError: null,
      subscriptions: 1,
      newestSubscription: { id: 4, status: 'registered', lastError: null },
    },
  ],
  projections: [
    {
      name: 'menu',
      position: 10,
      head: 12,
      lag: 2,
      parked: 0,
      lastError: null,
      waitingSince: secondsBefore(1),
      checkpointMovedAt: secondsBefore(600),
    },
  ],
  sinks: { total: 1, byState: { active: 0, retrying: 1, failing: 0, disabled: 0 }, attention: 0, needingAttention: [] },
  lastReconcile: { id: 3, trigger: 'schedule', outcome: 'ok', startedAt: '2026-01-01T00:00:00Z', errors: [] },
  quarantined: 4,
});

const thresholds: StatusThresholds = { lagEvents: 100, stallMs: 30_000, webhookKeys: false };
const attention = (snapshot: StatusSnapshot, given: Partial<StatusThresholds> = {}) =>
  statusReport(snapshot, { ...thresholds, ...given }).attention;

describe('statusReport', () => {
  it('is ok when all is well: a retrying sink that needs no attention yet, a lag of entries just arrived', () => {
    const report = statusReport(calm(), thresholds);
    expect([report.ok, report.attention, report.counts]).toEqual([
      true,
      [],
      { connections: 0, projections: 0, sinks: 0, reconcile: 0 },
    ]);
    expect(report.sinks).toEqual({
      total: 1,
      by_state: { active: 0, retrying: 1, failing: 0, disabled: 0 },
      attention: 0,
      needing_attention: [],
    });
    expect(report.connections.map((c) => [c.id, c.retired, c.attention, c.subscription])).toEqual([
      [1, false, false, { id: 4, status: 'registered', last_error: null }],
    ]);
  });

  it("shows where reconcile's per-store schedule stands, and null on a database without it", () => {
    expect(statusReport(calm(), thresholds).reconcile).toBeNull();
    const progress = { storesDone: 7, storesPending: 2, storesFailing: 1, nextDueAt: new Date('2026-01-01T00:05:00Z') };
    const report = statusReport({ ...calm(), reconcileProgress: progress }, thresholds);
    expect(report.reconcile).toEqual({
      stores_done: 7,
      stores_pending: 2,
      stores_failing: 1,
      next_due_at: '2026-01-01T00:05:00.000Z',
    });
    // A failing store is retried with backoff: shown, not a reason for attention by itself.
    expect(report.attention).toEqual([]);
  });

  it('names each sink that needs attention, and counts the others', () => {
    const snapshot = calm();
    snapshot.sinks = {
      total: 30,
      byState: { active: 5, retrying: 20, failing: 5, disabled: 0 },
      attention: 23,
      needingAttention: [
        {
          id: 'a1',
          kind: 'postgres',
          state: 'retrying',
          failingSince: secondsBefore(3),
          lastSuccessAt: null,
          lastError: '3D000 database "nowhere" does not exist',
        },
        {
          id: 'b2',
          kind: 'nats',
          state: 'failing',
          failingSince: secondsBefore(4 * 86400),
          lastSuccessAt: secondsBefore(5 * 86400),
          lastError: null,
        },
      ],
    };
    const report = statusReport(snapshot, thresholds);
    expect(report.attention).toEqual([
      'sink a1 retrying, never delivered, failing since 2025-12-31T23:59:57.000Z: 3D000 database "nowhere" does not exist',
      'sink b2 failing, failing since 2025-12-28T00:00:00.000Z',
      '21 more sink(s) need attention',
    ]);
    expect([report.ok, report.counts.sinks, report.sinks!.needing_attention.map((s) => s.id)]).toEqual([
      false,
      23,
      ['a1', 'b2'],
    ]);
  });

  it('no connected account needs attention, unless WEBHOOK_KEYS lets webhooks arrive without one', () => {
    const snapshot = calm();
    snapshot.connections = [];
    expect(attention(snapshot)).toEqual([
      'no account connected: connect one at /auth/connect or with `menu-sync auth url`',
    ]);
    expect(attention(snapshot, { webhookKeys: true })).toEqual([]);
  });

  it('a retired sandbox connection is shown retired and needs nothing; another needing reauthorization does', () => {
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
    const report = statusReport(snapshot, thresholds);
    expect(report.attention).toEqual(['connection 2 needs reauthorization: invalid_grant']);
    expect(report.connections.map((c) => [c.id, c.retired, c.attention])).toEqual([
      [1, false, false],
      [2, false, true],
      [3, true, false],
    ]);
    expect(report.counts.connections).toBe(1);
    snapshot.connections = [snapshot.connections[2]];
    expect(statusReport(snapshot, thresholds).counts.connections).toBe(1);
    expect(attention(snapshot)).toEqual([
      'no account connected: connect one at /auth/connect or with `menu-sync auth url`',
    ]);
  });

  it('a newest subscription that is not registered, or none at all, needs attention', () => {
    const snapshot = calm();
    snapshot.connections[0].newestSubscription = { id: 5, status: 'failed', lastError: 'the upstream answered 422' };
    snapshot.connections.push({ ...snapshot.connections[0], id: 2, subscriptions: 0, newestSubscription: null });
    expect(attention(snapshot)).toEqual([
      'connection 1: webhook subscription 5 is failed (the upstream answered 422)',
      'connection 2: no webhook subscription (run `menu-sync subscribe`)',
    ]);
  });

  it('a failed reconcile and parked events need attention', () => {
    const snapshot = calm();
    snapshot.lastReconcile!.outcome = 'failed';
    snapshot.projections[0].parked = 2;
    snapshot.projections[0].lastError = 'bad';
    expect(attention(snapshot)).toEqual(['projection menu: 2 parked event(s) (bad)', 'last reconcile run (#3) failed']);
  });

  it('lag: at the threshold; growing between two reads while the position stands; waiting while the projector stands', () => {
    expect(attention(calm(), { lagEvents: 2 })).toEqual(['projection menu: lag 2 events (threshold 2)']);
    const stuck = calm();
    stuck.later = [{ name: 'menu', position: 10, lag: 5 }];
    expect(attention(stuck)).toEqual(['projection menu: lag growing (2 → 5) and the projector is not moving']);
    const moving = calm();
    moving.later = [{ name: 'menu', position: 11, lag: 5 }];
    expect(attention(moving)).toEqual([]);
    const waiting = calm();
    waiting.projections[0].waitingSince = secondsBefore(45);
    expect(attention(waiting)).toEqual(['projection menu: 2 event(s) waiting 45 s and the projector is not moving']);
    // A long backlog being worked through: the checkpoint moved a moment ago.
    waiting.projections[0].checkpointMovedAt = secondsBefore(1);
    expect(attention(waiting)).toEqual([]);
  });
});
