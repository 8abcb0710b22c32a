import { Injectable, OnModuleInit } from '@nestjs/common';
import { Gauge } from 'prom-client';
import { AppConfig, ROLE_NAMES } from '../config/app-config.js';
import { MetricsService } from './metrics.service.js';

/** `menu_sync_role{role}` (docs/reference.md §10): 1 for each role this process holds, 0 for the others. */
@Injectable()
export class RolesGauge implements OnModuleInit {
  constructor(
    private readonly metrics: MetricsService,
    private readonly config: AppConfig,
  ) {}

  onModuleInit(): void {
    const gauge = new Gauge({
      name: 'menu_sync_role',
      help: 'The roles this process holds (ROLES): 1 held, 0 not',
      labelNames: ['role'] as const,
      registers: [this.metrics.registry],
    });
    for (const role of ROLE_NAMES) gauge.set({ role }, this.config.hasRole(role) ? 1 : 0);
  }
}
