import { Injectable, OnModuleInit } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { MetricsService } from '../observability/metrics.service.js';
import { ChangeLogRepository } from './change-log.repository.js';

/** `menu_sync_change_log_head` (docs/reference.md §11): the newest seq written, read at each scrape. */
@Injectable()
export class ChangeLogHeadGauge implements OnModuleInit {
  constructor(
    private readonly metrics: MetricsService,
    private readonly changes: ChangeLogRepository,
  ) {}

  onModuleInit(): void {
    const changes = this.changes;
    new Gauge({
      name: 'menu_sync_change_log_head',
      help: 'Highest seq written to the change log',
      registers: [this.metrics.registry],
      async collect() {
        this.set(await changes.head().catch(() => 0));
      },
    });
  }
}
