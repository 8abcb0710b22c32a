import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config.js';
import { readStatus } from '../observability/status-reader.js';
import type { StatusReport } from '../observability/status-report.js';
import { StatusRepository } from '../observability/status.repository.js';
import { PROJECTIONS } from '../projection/projection-definitions.js';

/** `GET /api/v1/status`: the report `menu-sync status` prints, computed by the same code (docs/reference.md §10). */
@Injectable()
export class StatusService {
  private readonly status: StatusRepository;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly config: AppConfig,
  ) {
    this.status = new StatusRepository(dataSource, PROJECTIONS);
  }

  report(lagThreshold?: number): Promise<StatusReport> {
    return readStatus(this.status, {
      lagThreshold,
      sinkAttentionAfterMs: this.config.sinkAttentionAfterMs,
      webhookKeys: this.config.WEBHOOK_KEYS.length > 0,
    });
  }
}
