import { Module } from '@nestjs/common';
import { ActivityController } from './activity.controller.js';
import { ActivityCounter } from './activity-counter.service.js';
import { ActivityRetentionService } from './activity-retention.service.js';
import { ActivityRepository } from './activity.repository.js';
import { ActivityService } from './activity.service.js';

/** Counting only (docs/reference.md §11): what a room that counts imports. `ActivityCounter.add` is the one call. */
@Module({
  providers: [ActivityRepository, ActivityCounter],
  exports: [ActivityCounter, ActivityRepository],
})
export class ActivityModule {}

/** The daemon's side: `GET /api/v1/activity` and the retention job (ACTIVITY_RETENTION). */
@Module({
  imports: [ActivityModule],
  controllers: [ActivityController],
  providers: [ActivityService, ActivityRetentionService],
})
export class ActivityApiModule {}
