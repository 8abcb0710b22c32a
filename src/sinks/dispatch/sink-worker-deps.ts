import type { ActivityCounter } from '../../activity/activity-counter.service.js';
import type { ChangeLogRepository } from '../../changes/change-log.repository.js';
import type { ChangeRouter } from '../../changes/change-router.service.js';
import type { Limiter } from '../../common/limiter.js';
import type { MetricsService } from '../../observability/metrics.service.js';
import type { SinkAttemptsService } from '../attempts/sink-attempts.service.js';
import type { HttpSinkClient } from '../http/http-sink.client.js';
import type { NatsSinkClient } from '../nats/nats-sink.client.js';
import type { SinkRepository } from '../sink.repository.js';
import type { SinkSnapshots } from '../sink-start.js';
import type { SinkWrites } from '../sink-writes.js';
import type { TableSinksClient } from '../tables/table-sinks.client.js';
import type { SinkWorker } from './sink-worker.js';

/** What a sink's delivery loop (SinkWorker) works with, given by the dispatcher. */
export interface SinkWorkerDeps {
  repository: SinkRepository;
  writes: SinkWrites;
  /** The loops' own statements take turns here: thousands of loops starting together would time out on the pool. */
  db: Limiter;
  changeLog: ChangeLogRepository;
  router: ChangeRouter;
  snapshots: SinkSnapshots;
  http: HttpSinkClient;
  nats: NatsSinkClient;
  tables: TableSinksClient;
  metrics: MetricsService;
  attempts: Pick<SinkAttemptsService, 'record'>;
  activity: Pick<ActivityCounter, 'add'>;
  failingAfterMs: number;
  defaultTypes: readonly string[];
  /**
   * How long an idle worker reading on its own waits for a wake before it reads its sink and looks
   * again: only a safety net, since the dispatcher wakes it for new changes and for a changed sink.
   * A worker following the shared read waits for its changes without a timer.
   */
  idlePollMs: number;
  /**
   * How old the cursor of a sink following the shared read may grow while nothing it follows
   * changes, before it is written forward (so compaction never passes it): it is not written for
   * the other stores' changes it skips.
   */
  idleCursorMs: number;
  /** Told when the loop ended by itself (its sink removed or disabled), not when stopped. */
  stopped?(sinkId: string): void;
  /** Told whether the worker reads on its own (it starts so; false while it follows the shared read, and once ended). */
  reading?(worker: SinkWorker, on: boolean): void;
}
