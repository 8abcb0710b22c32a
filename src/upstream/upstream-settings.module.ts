import { DynamicModule, Global, Module } from '@nestjs/common';
import { UPSTREAM_SETTINGS, UpstreamSettings } from './upstream-settings.js';

/** Provides the upstream of this process (`UpstreamSettings | null`) to every module. */
@Global()
@Module({})
export class UpstreamSettingsModule {
  static forRoot(settings: UpstreamSettings | null): DynamicModule {
    return {
      module: UpstreamSettingsModule,
      providers: [{ provide: UPSTREAM_SETTINGS, useValue: settings }],
      exports: [UPSTREAM_SETTINGS],
    };
  }
}
