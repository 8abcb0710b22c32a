import { Injectable, OnModuleInit } from '@nestjs/common';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import { MetricsService } from '../observability/metrics.service.js';
import { PROJECTIONS } from './projection-definitions.js';
import { ProjectionStatusRepository } from './projection-status.repository.js';
import { ProjectorService } from './projector.service.js';

const PARKED_LIMIT = 1000;

/** `GET /api/v1/projections` (docs/reference.md §5); the same figures feed the gauges at each scrape. */
@Injectable()
export class ProjectionStatusService implements OnModuleInit {
  constructor(
    private readonly projections: ProjectionStatusRepository,
    private readonly log: EventLogRepository,
    private readonly projector: ProjectorService,
    private readonly metrics: MetricsService,
  ) {}

  onModuleInit(): void {
    // One status query serves the four gauges of a scrape.
    let pending: Promise<unknown> | undefined;
    const refresh = async () => {
      pending ??= this.list()
        .catch(() => undefined)
        .finally(() => setImmediate(() => (pending = undefined)));
      await pending;
    };
    for (const gauge of [
      this.metrics.logHead,
      this.metrics.projectionLag,
      this.metrics.parkedEvents,
      this.metrics.projectionPosition,
    ]) {
      (gauge as unknown as { collect: () => Promise<void> }).collect = refresh;
    }
  }

  /** `GET /api/v1/projections/parked`: what each projection parked, with its error (newest first, at most 1000 each). */
  async parked() {
    const lists = await Promise.all(
      PROJECTIONS.map(async (projection) =>
        (await this.projections.parked(projection, PARKED_LIMIT)).map((entry) => ({
          projection: projection.name,
          position: entry.position,
          event_id: entry.eventId,
          error: entry.error,
          parked_at: entry.parkedAt.toISOString(),
        })),
      ),
    );
    return { data: lists.flat().sort((a, b) => b.position - a.position) };
  }

  async list() {
    const head = await this.log.headPosition();
    this.metrics.observeHead(head);
    const data = await Promise.all(
      PROJECTIONS.map(async (projection) => {
        const status = await this.projections.status(projection);
        const lag = await this.projections.lag(status.checkpoint);
        const labels = { projection: projection.name };
        this.metrics.projectionLag.set(labels, lag);
        this.metrics.parkedEvents.set(labels, status.parked);
        this.metrics.projectionPosition.set(labels, Number(status.checkpoint.position));
        return {
          name: projection.name,
          position: Number(status.checkpoint.position),
          head,
          lag,
          state: this.projector.stateOf(projection.name),
          parked: status.parked,
          last_error: status.lastError,
        };
      }),
    );
    return { data };
  }
}
