import { AppConfig } from '../config/app-config.js';

/**
 * The upstream this daemon connects to, and as which application: the configured one
 * (UPSTREAM_AUTH_URL / UPSTREAM_BASE_URL with OAUTH_CLIENT_ID / OAUTH_CLIENT_SECRET), or the
 * built-in emulator of the zero-config sandbox. Null when neither: nothing can be connected.
 */
export class UpstreamSettings {
  constructor(
    private readonly config: AppConfig,
    readonly mode: 'configured' | 'emulator',
    readonly authUrl: string,
    readonly baseUrl: string,
    readonly clientId: string,
    readonly clientSecret: string,
    /** Stores this upstream is known to have besides STORE_IDS (the emulator's demo store). */
    readonly storeIds: string[] = [],
  ) {}

  static fromConfig(config: AppConfig): UpstreamSettings | null {
    if (!config.hasUpstream) return null;
    const baseUrl = config.UPSTREAM_BASE_URL!;
    return new UpstreamSettings(
      config,
      'configured',
      (config.UPSTREAM_AUTH_URL ?? baseUrl).replace(/\/+$/, ''),
      baseUrl.replace(/\/+$/, ''),
      config.OAUTH_CLIENT_ID!,
      config.OAUTH_CLIENT_SECRET!,
    );
  }

  /** The built-in emulator at `url` (both `{auth_url}` and `{base_url}`), with its demo application. */
  static emulator(
    config: AppConfig,
    url: string,
    storeIds: string[],
    clientId = 'demo-client',
    clientSecret = 'demo-secret',
  ): UpstreamSettings {
    return new UpstreamSettings(config, 'emulator', url, url, clientId, clientSecret, storeIds);
  }

  get mediaType(): string {
    return this.config.UPSTREAM_MEDIA_TYPE;
  }

  get scopes(): string[] {
    return this.config.OAUTH_SCOPES;
  }

  get enabledEvents(): string[] {
    return this.config.ENABLED_EVENTS;
  }

  /** Read when used: with PORT=0 the public URL is known only once the daemon listens. */
  get redirectUri(): string {
    return this.config.redirectUri;
  }

  get publicUrl(): string {
    return this.config.publicUrl;
  }
}

/** Provides `UpstreamSettings | null`. */
export const UPSTREAM_SETTINGS = Symbol('UPSTREAM_SETTINGS');
