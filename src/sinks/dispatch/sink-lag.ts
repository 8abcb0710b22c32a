import { Logger } from '@nestjs/common';
import type { Limiter } from '../../common/limiter.js';
import { MetricsService } from '../../observability/metrics.service.js';
import type { Sink } from '../sink.js';
import { SinkRepository } from '../sink.repository.js';

const EVERY_MS = 5000;

/**
 * A worker's `menu_sync_sink_lag_changes`: counted beside the deliveries, never between them, and
 * between two counts lowered by what was delivered (a count walks the whole backlog).
 */
export class SinkLag {
  private readonly logger = new Logger(SinkLag.name);
  private measuredAt = 0;
  private tookMs = 0;
  private running: Promise<void> | null = null;
  /** The last count; -1 before the first. */
  last = -1;

  constructor(
    private readonly repository: SinkRepository,
    private readonly metrics: MetricsService,
    private readonly defaultTypes: readonly string[],
    private readonly db: Limiter,
  ) {}

  /** While delivering: at most every five seconds, and never more than a fiftieth of the time. */
  soon(sink: Sink): void {
    if (this.running !== null || Date.now() - this.measuredAt < Math.max(EVERY_MS, 50 * this.tookMs)) return;
    this.running = this.measure(sink)
      .catch((error) => this.logger.warn({ msg: 'sink lag could not be counted', sink: sink.id, err: String(error) }))
      .finally(() => (this.running = null));
  }

  /** Once the sink has caught up: at once, after a count still running (which would be older). */
  async now(sink: Sink): Promise<void> {
    await this.settled();
    await this.measure(sink);
  }

  /** `changes` of the backlog were delivered. */
  delivered(sink: Sink, changes: number): void {
    if (this.last <= 0) return;
    this.last = Math.max(0, this.last - changes);
    this.metrics.sinks.lag(sink, this.last);
  }

  /** The backlog is known without a count: `changes` (a sink following the shared read has them in hand). */
  known(sink: Sink, changes: number): void {
    if (this.last === changes) return;
    this.last = changes;
    this.metrics.sinks.lag(sink, changes);
  }

  async settled(): Promise<void> {
    await this.running;
  }

  private async measure(sink: Sink): Promise<void> {
    const started = Date.now();
    this.last = await this.db.run(() => this.repository.lag(sink, sink.types ?? this.defaultTypes, sink.ownerIds));
    this.measuredAt = Date.now();
    this.tookMs = this.measuredAt - started;
    this.metrics.sinks.lag(sink, this.last);
  }
}
