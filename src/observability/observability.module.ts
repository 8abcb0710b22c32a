import { Global, Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { DatabaseHealthIndicator } from './database.health.js';
import { HealthController } from './health.controller.js';
import { MetricsController } from './metrics.controller.js';
import { MetricsService } from './metrics.service.js';
import { ReadinessChecks } from './readiness-checks.js';
import { ReadReplicaGauge } from './read-replica.gauge.js';
import { RolesGauge } from './roles.gauge.js';

@Global()
@Module({
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [HealthController, MetricsController],
  providers: [MetricsService, DatabaseHealthIndicator, ReadReplicaGauge, RolesGauge, ReadinessChecks],
  exports: [MetricsService, ReadinessChecks],
})
export class ObservabilityModule {}
