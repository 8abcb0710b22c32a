import { Injectable, OnModuleInit } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import { ReadinessChecks } from '../observability/readiness-checks.js';

/**
 * With the `ingress` role, /health/ready runs an append of nothing: the deliveries' own statement,
 * on their own pool, which fails as theirs would (a pooler that lost its prepared statement, a
 * read-only database) while it inserts no row.
 */
@Injectable()
export class AppendReadiness implements OnModuleInit {
  constructor(
    private readonly config: AppConfig,
    private readonly checks: ReadinessChecks,
    private readonly eventLog: EventLogRepository,
  ) {}

  onModuleInit(): void {
    if (this.config.hasRole('ingress')) this.checks.add('an append', () => this.eventLog.append([]));
  }
}
