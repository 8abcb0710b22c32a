import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { hasPendingMigrations } from '../database/migration.runner.js';

/** Ready = the database answers and every migration is applied. */
@Injectable()
export class DatabaseHealthIndicator {
  constructor(
    private readonly health: HealthIndicatorService,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {}

  async check() {
    const indicator = this.health.check('database');
    try {
      const pending = await withTimeout(hasPendingMigrations(this.dataSource), 3000);
      return pending ? indicator.down({ message: 'migrations pending' }) : indicator.up();
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
