import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { hasPendingMigrations } from '../database/migration.runner.js';
import { ReadinessChecks } from './readiness-checks.js';

/** Ready = the database answers, every migration is applied, and every ReadinessChecks check passes (an append). */
@Injectable()
export class DatabaseHealthIndicator {
  constructor(
    private readonly health: HealthIndicatorService,
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly checks: ReadinessChecks,
  ) {}

  async check() {
    const indicator = this.health.check('database');
    try {
      const pending = await withTimeout(hasPendingMigrations(this.dataSource), 3000);
      if (pending) return indicator.down({ message: 'migrations pending' });
      const failing = await withTimeout(this.checks.failing(), 3000);
      return failing.length > 0 ? indicator.down({ message: `${failing.join(', ')} would fail` }) : indicator.up();
    } catch {
      return indicator.down({ message: 'database unreachable' });
    }
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), ms))),
  ]).finally(() => clearTimeout(timer));
}
