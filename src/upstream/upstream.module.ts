import { Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { ConnectionsModule } from '../connections/connections.module.js';
import { OAuthClient } from './oauth-client.js';
import { RateBudget } from './rate-budget.js';
import { TokenRefresher } from './token-refresher.js';
import { UpstreamClient } from './upstream-client.js';
import { DEFAULT_UPSTREAM_TIMINGS, UPSTREAM_TIMINGS } from './upstream-timings.js';

/** The OAuth client, the token refresher, the one HTTP client of `{base_url}` and its rate budget (MetricsService is global). */
@Module({
  imports: [ConnectionsModule],
  providers: [
    { provide: UPSTREAM_TIMINGS, useValue: DEFAULT_UPSTREAM_TIMINGS },
    {
      provide: RateBudget,
      useFactory: (config: AppConfig) => new RateBudget(config.UPSTREAM_RATE_LIMIT),
      inject: [AppConfig],
    },
    OAuthClient,
    TokenRefresher,
    UpstreamClient,
  ],
  exports: [OAuthClient, TokenRefresher, UpstreamClient],
})
export class UpstreamModule {}
