import { ArchiveRow, Horizon } from './archive-horizon.js';

const row = (
  state: ArchiveRow['state'],
  lowerBound: number,
  upperBound: number,
  lastOccurredAt: string | null,
): ArchiveRow => ({
  state,
  lowerBound,
  upperBound,
  file: `event_log_${lowerBound}.ndjson.gz`,
  bytes: 100 + lowerBound / 1000,
  lastOccurredAt: lastOccurredAt === null ? null : new Date(lastOccurredAt),
});

describe('Horizon', () => {
  it('nothing archived: every position and instant is in the log', () => {
    const horizon = new Horizon([row('exported', 0, 1000, '2024-01-01T00:00:00Z')]);
    expect(horizon.position).toBe(0);
    expect(horizon.asOfBefore).toBeNull();
    expect(horizon.ofPosition(1)).toBeUndefined();
    expect(horizon.ofAsOf(new Date(0))).toBeUndefined();
    expect(horizon.files).toEqual({ count: 0, bytes: 0, newest: null });
  });

  it('as_of reads the archive base from the first export on (before its drop), never without a row', () => {
    expect(new Horizon([]).readsArchiveBase).toBe(false);
    expect(new Horizon([row('exported', 0, 1000, '2024-01-01T00:00:00Z')]).readsArchiveBase).toBe(true);
    expect(new Horizon([row('restored', 0, 1000, '2024-01-01T00:00:00Z')]).readsArchiveBase).toBe(true);
  });

  it('given archived, restored and exported rows, each position below the horizon names its file', () => {
    const horizon = new Horizon([
      row('archived', 2000, 3000, '2024-03-01T00:00:00Z'),
      row('archived', 0, 1000, '2024-01-01T00:00:00Z'),
      row('restored', 1000, 2000, '2024-04-01T00:00:00Z'),
      row('exported', 3000, 4000, '2024-05-01T00:00:00Z'),
      row('archived', 5000, 6000, '2024-02-01T00:00:00Z'),
    ]);
    expect(horizon.position).toBe(6000);
    expect(horizon.ofPosition(0)).toEqual({ archivedBefore: 6000, file: 'event_log_0.ndjson.gz' });
    expect(horizon.ofPosition(999)).toEqual({ archivedBefore: 6000, file: 'event_log_0.ndjson.gz' });
    expect(horizon.ofPosition(1000)).toBeUndefined();
    expect(horizon.ofPosition(1999)).toBeUndefined();
    expect(horizon.ofPosition(2000)).toEqual({ archivedBefore: 6000, file: 'event_log_2000.ndjson.gz' });
    // In no archived row's range but below the horizon (still exported): the next file up.
    expect(horizon.ofPosition(3500)).toEqual({ archivedBefore: 6000, file: 'event_log_5000.ndjson.gz' });
    expect(horizon.ofPosition(5999)).toEqual({ archivedBefore: 6000, file: 'event_log_5000.ndjson.gz' });
    expect(horizon.ofPosition(6000)).toBeUndefined();
    expect(horizon.files).toEqual({ count: 3, bytes: 307, newest: 'event_log_5000.ndjson.gz' });
  });

  it('as_of: older than the newest archived occurred_at is across; that instant and later are not', () => {
    const horizon = new Horizon([
      row('archived', 0, 1000, '2024-03-01T00:00:00Z'),
      row('archived', 1000, 2000, '2024-02-01T00:00:00Z'),
      row('restored', 2000, 3000, '2024-06-01T00:00:00Z'),
    ]);
    expect(horizon.asOfBefore).toEqual(new Date('2024-03-01T00:00:00Z'));
    expect(horizon.ofAsOf(new Date('2024-02-29T23:59:59.999Z'))).toEqual({
      archivedBefore: '2024-03-01T00:00:00.000Z',
      file: 'event_log_1000.ndjson.gz',
    });
    expect(horizon.ofAsOf(new Date('2024-03-01T00:00:00Z'))).toBeUndefined();
    expect(horizon.ofAsOf(new Date('2024-05-01T00:00:00Z'))).toBeUndefined();
  });
});
