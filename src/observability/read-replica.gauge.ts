import { Injectable, OnModuleInit } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { ReadRouter } from '../database/read-router.service.js';
import { MetricsService } from './metrics.service.js';

/** `menu_sync_read_replica_lag_seconds` and `menu_sync_read_replica_up`, with a replica configured (DATABASE_READ_URL). */
@Injectable()
export class ReadReplicaGauge implements OnModuleInit {
  constructor(
    private readonly metrics: MetricsService,
    private readonly router: ReadRouter,
  ) {}

  onModuleInit(): void {
    const router = this.router;
    if (!router.configured) return;
    new Gauge({
      name: 'menu_sync_read_replica_lag_seconds',
      help: 'Age of the oldest WAL position of the primary (noted every second) that the read replica has not replayed',
      registers: [this.metrics.registry],
      collect() {
        this.set(router.lagSeconds);
      },
    });
    new Gauge({
      name: 'menu_sync_read_replica_up',
      help: 'Whether the read replica answered its last check',
      registers: [this.metrics.registry],
      collect() {
        this.set(router.up ? 1 : 0);
      },
    });
  }
}
