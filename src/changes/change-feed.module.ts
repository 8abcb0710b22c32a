import { Module } from '@nestjs/common';
import { ChangeFeedService } from './change-feed.service.js';
import { ChangeLogHeadGauge } from './change-log-head.gauge.js';
import { ChangeNotifier } from './change-notifier.service.js';
import { ChangeRouter } from './change-router.service.js';
import { ChangeRetentionService } from './change-retention.service.js';
import { ChangesController } from './changes.controller.js';
import { ChangesModule } from './changes.module.js';

/** The daemon's side of the change log: the feed (pages, long-poll, SSE), its wake-ups, retention and the head metric. */
@Module({
  imports: [ChangesModule],
  controllers: [ChangesController],
  providers: [ChangeFeedService, ChangeNotifier, ChangeRouter, ChangeRetentionService, ChangeLogHeadGauge],
  exports: [ChangeNotifier, ChangeRouter],
})
export class ChangeFeedModule {}
