import type { StatusReport } from '../observability/status-report.js';
import { formatStatus } from './status-screen.js';

const report = (archive: StatusReport['archive'] | undefined): StatusReport =>
  ({
    ok: true,
    attention: [],
    counts: { connections: 0, projections: 0, sinks: 0, reconcile: 0 },
    at: '2024-05-01T00:00:00.000Z',
    connections: [],
    projections: [],
    sinks: null,
    last_reconcile: null,
    reconcile: null,
    ...(archive === undefined ? {} : { archive }),
    quarantined: 0,
  }) as StatusReport;

const archiveLine = (text: string) => text.split('\n').find((line) => line.startsWith('Archive'));

describe('menu-sync status: the Archive line', () => {
  it('names the horizon, the oldest as_of, the files and their size', () => {
    const screen = formatStatus(
      report({
        horizon: 3_000_000,
        as_of_before: '2024-02-01T00:00:00.000Z',
        files: 3,
        bytes: 5 * 1024 * 1024 + 300 * 1024,
        newest_file: 'event_log_2000000.ndjson.gz',
        restored: 1,
      }),
      false,
    );
    expect(archiveLine(screen)).toBe(
      'Archive  horizon 3000000 (as_of from 2024-02-01T00:00:00.000Z), 3 file(s), 5.3 MiB, newest event_log_2000000.ndjson.gz; 1 range(s) restored',
    );
  });

  it('says when nothing is archived, and shows no line for a database or daemon without an archive', () => {
    const none = { horizon: 0, as_of_before: null, files: 0, bytes: 0, newest_file: null, restored: 0 };
    expect(archiveLine(formatStatus(report(none), false))).toBe('Archive  nothing archived');
    expect(archiveLine(formatStatus(report(null), false))).toBeUndefined();
    expect(archiveLine(formatStatus(report(undefined), false))).toBeUndefined();
  });
});
