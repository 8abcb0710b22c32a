import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { ApiTags } from '@nestjs/swagger';
import { AppConfig } from '../config/app-config.js';
import { DatabaseHealthIndicator } from './database.health.js';

@ApiTags('operations')
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly database: DatabaseHealthIndicator,
    private readonly config: AppConfig,
  ) {}

  @Get('live')
  live() {
    return { status: 'ok' };
  }

  /** Ready: the database answers and every migration is applied; no role's loop is waited for (a standby is ready). */
  @Get('ready')
  @HealthCheck()
  async ready() {
    return { ...(await this.health.check([() => this.database.check()])), roles: this.config.roles };
  }
}
