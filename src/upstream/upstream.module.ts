import { Module } from '@nestjs/common';
import { ConnectionsModule } from '../connections/connections.module.js';
import { OAuthClient } from './oauth-client.js';
import { TokenRefresher } from './token-refresher.js';
import { UpstreamClient } from './upstream-client.js';
import { DEFAULT_UPSTREAM_TIMINGS, UPSTREAM_TIMINGS } from './upstream-timings.js';

/** The OAuth client, the token refresher and the one HTTP client of `{base_url}` (MetricsService is global). */
@Module({
  imports: [ConnectionsModule],
  providers: [
    { provide: UPSTREAM_TIMINGS, useValue: DEFAULT_UPSTREAM_TIMINGS },
    OAuthClient,
    TokenRefresher,
    UpstreamClient,
  ],
  exports: [OAuthClient, TokenRefresher, UpstreamClient],
})
export class UpstreamModule {}
