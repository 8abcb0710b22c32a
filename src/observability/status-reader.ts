import { setTimeout as sleep } from 'node:timers/promises';
import { PROJECTOR_STALL_MS, statusReport, StatusReport } from './status-report.js';
import type { StatusRepository } from './status.repository.js';

export interface StatusReadOptions {
  /** A lag at or above this needs attention (default 10000). */
  lagThreshold?: number;
  /** When above 0, the projections are read again after this long, to see a lag grow. */
  intervalMs?: number;
  /** SINK_ATTENTION_AFTER in milliseconds. */
  sinkAttentionAfterMs: number;
  /** Whether WEBHOOK_KEYS names any key (webhooks can then arrive without a connection). */
  webhookKeys: boolean;
}

export const DEFAULT_LAG_THRESHOLD = 10_000;

/** Reads the daemon's database once (twice for the projections with `intervalMs`) and reports (status-report.ts). */
export async function readStatus(status: StatusRepository, options: StatusReadOptions): Promise<StatusReport> {
  const [projections, connections, sinks, lastReconcile, reconcileProgress, archive, quarantined] = await Promise.all([
    status.projectionStates(),
    status.connections(),
    status.sinks(options.sinkAttentionAfterMs),
    status.lastReconcile(),
    status.reconcileProgress(),
    status.archive(),
    status.quarantined(),
  ]);
  const intervalMs = options.intervalMs ?? 0;
  let later: Array<{ name: string; position: number; lag: number }> | undefined;
  if (intervalMs > 0) {
    await sleep(intervalMs);
    later = (await status.projectionStates()).map(({ name, position, lag }) => ({ name, position, lag }));
  }
  return statusReport(
    { at: new Date(), connections, projections, later, sinks, lastReconcile, reconcileProgress, archive, quarantined },
    {
      lagEvents: options.lagThreshold ?? DEFAULT_LAG_THRESHOLD,
      stallMs: PROJECTOR_STALL_MS,
      webhookKeys: options.webhookKeys,
    },
  );
}
