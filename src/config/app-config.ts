import { plainToInstance, Transform } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsBoolean,
  IsIn,
  IsInt,
  IsNumber,
  IsOptional,
  IsString,
  IsUrl,
  Matches,
  Max,
  Min,
  MinLength,
  IsArray,
  Validate,
  validateSync,
  ValidateIf,
  ValidationArguments,
  ValidationError,
  ValidatorConstraint,
  ValidatorConstraintInterface,
} from 'class-validator';
import { SPEC_EVENT_NAMES } from '../domain/event-names.js';
import { RESOURCE_TYPE_NAMES, resourceTypesProblem } from '../domain/resource-type-names.js';
import { Network, parseNetwork } from './networks.js';

/** CHANGES_TYPES: resource types in the singular (a plural is named with its singular), or `none`. */
@ValidatorConstraint({ name: 'isChangeTypes' })
class IsChangeTypes implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    return Array.isArray(value) && resourceTypesProblem(value, ['none']) === null;
  }

  defaultMessage(args: ValidationArguments): string {
    return Array.isArray(args.value)
      ? resourceTypesProblem(args.value, ['none'])!
      : `CHANGES_TYPES must list resource types (${RESOURCE_TYPE_NAMES.join(', ')}) or be none`;
  }
}

@ValidatorConstraint({ name: 'isNetwork' })
class IsNetwork implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    return typeof value === 'string' && parseNetwork(value) !== undefined;
  }

  defaultMessage(): string {
    return 'SINK_ALLOWED_NETWORKS must list CIDRs such as 127.0.0.0/8,::1/128 (an address, /, a prefix length)';
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const list = ({ value }: { value: unknown }) =>
  typeof value === 'string'
    ? value
        .split(/[\s,]+/)
        .map((item) => item.trim())
        .filter((item) => item.length > 0)
    : value;

const int = ({ value }: { value: unknown }) =>
  typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;

const bool = ({ value }: { value: unknown }) => {
  if (typeof value !== 'string') return value;
  const normalized = value.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(normalized)) return true;
  if (['false', '0', 'no', 'off'].includes(normalized)) return false;
  return value;
};

const DURATION = /^(\d{1,9})(ms|s|m|h|d)$/;
const DURATION_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
/** A validated DURATION in milliseconds. */
const durationMs = (value: string) => {
  const [, amount, unit] = DURATION.exec(value)!;
  return Number(amount) * DURATION_MS[unit];
};

const pgUrl = /^postgres(ql)?:\/\/.+/;

/** What a process can do (docs/reference.md §1, Roles); a process holds all of them unless ROLES names fewer. */
export const ROLE_NAMES = ['ingress', 'api', 'projector', 'sinks', 'reconcile', 'console'] as const;
export type Role = (typeof ROLE_NAMES)[number];

export type ApiRole = 'read' | 'admin';
export interface ApiToken {
  role: ApiRole;
  token: string;
}

/** Names of the variables whose values are secrets: masked in every dump. */
export const SECRET_VARIABLES = new Set([
  'DATABASE_URL',
  'DATABASE_READ_URL',
  'DATABASE_MIGRATION_URL',
  'DATABASE_DIRECT_URL',
  'OAUTH_CLIENT_SECRET',
  'WEBHOOK_KEYS',
  'API_TOKENS',
  'TOKEN_ENCRYPTION_KEY',
  'NATS_URL',
  'MENU_SYNC_TOKEN',
]);

/**
 * The whole configuration, read once from the environment (docs/reference.md §1).
 * Property names are the variable names, so that an error names the variable.
 */
export class AppConfig {
  @IsOptional()
  @Matches(pgUrl, { message: 'DATABASE_URL must be a postgres:// or postgresql:// URL' })
  DATABASE_URL?: string;

  /**
   * The database itself, for what needs a session of its own (leases, LISTEN, migrations) while
   * DATABASE_URL goes through a transaction-mode pooler; unset: DATABASE_URL.
   */
  @IsOptional()
  @Matches(pgUrl, { message: 'DATABASE_DIRECT_URL must be a postgres:// or postgresql:// URL' })
  DATABASE_DIRECT_URL?: string;

  /** Named prepared statements on DATABASE_URL: `on` | `off`; unset: on unless DATABASE_DIRECT_URL is set. */
  @IsOptional()
  @IsIn(['on', 'off'], { message: 'DATABASE_PREPARED_STATEMENTS must be on or off' })
  DATABASE_PREPARED_STATEMENTS?: 'on' | 'off';

  get preparedStatements(): boolean {
    return (this.DATABASE_PREPARED_STATEMENTS ?? (this.DATABASE_DIRECT_URL === undefined ? 'on' : 'off')) === 'on';
  }

  /** A streaming replica (hot standby) of the database that serves the reads (docs/reference.md §5); unset: the primary does. */
  @IsOptional()
  @Matches(pgUrl, { message: 'DATABASE_READ_URL must be a postgres:// or postgresql:// URL' })
  DATABASE_READ_URL?: string;

  /** The role `menu-sync migrate` (and MIGRATIONS_RUN at start) connects as; unset: DATABASE_URL's. */
  @IsOptional()
  @Matches(pgUrl, { message: 'DATABASE_MIGRATION_URL must be a postgres:// or postgresql:// URL' })
  DATABASE_MIGRATION_URL?: string;

  /** A CA file (PEM) the database's certificate must chain to; sslmode verify-full unless the URL says otherwise. */
  @IsOptional()
  @IsString()
  DATABASE_SSL_ROOT_CERT?: string;

  /** Reads go to the primary while the replica lags more than this: `5s`, `500ms`, `1m`. */
  @Matches(DURATION, { message: 'READ_REPLICA_MAX_LAG must be a duration such as 5s, 500ms or 1m' })
  READ_REPLICA_MAX_LAG = '5s';

  get readReplicaMaxLagMs(): number {
    return durationMs(this.READ_REPLICA_MAX_LAG);
  }

  @IsString()
  @MinLength(1)
  DATA_DIR = './data';

  @IsString()
  @MinLength(1)
  HOST = '0.0.0.0';

  @Transform(int)
  @IsInt({ message: 'PORT must be an integer from 0 to 65535' })
  @Min(0)
  @Max(65535)
  PORT = 3000;

  @IsOptional()
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  PUBLIC_URL?: string;

  @IsOptional()
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  UPSTREAM_AUTH_URL?: string;

  @ValidateIf((config: AppConfig) => config.UPSTREAM_AUTH_URL !== undefined || config.UPSTREAM_BASE_URL !== undefined)
  @IsUrl(
    { require_tld: false, require_protocol: true, protocols: ['http', 'https'] },
    { message: 'UPSTREAM_BASE_URL must be an http(s) URL, and is required with UPSTREAM_AUTH_URL' },
  )
  UPSTREAM_BASE_URL?: string;

  @IsString()
  @Matches(/^[\w.+-]+\/[\w.+-]+$/, {
    message: 'UPSTREAM_MEDIA_TYPE must be a media type such as application/vnd.service.v2',
  })
  UPSTREAM_MEDIA_TYPE = 'application/vnd.service.v2';

  @ValidateIf((config: AppConfig) => config.hasUpstream)
  @IsString({ message: 'OAUTH_CLIENT_ID is required when an upstream is configured' })
  @MinLength(1)
  OAUTH_CLIENT_ID?: string;

  @ValidateIf((config: AppConfig) => config.hasUpstream)
  @IsString({ message: 'OAUTH_CLIENT_SECRET is required when an upstream is configured' })
  @MinLength(1)
  OAUTH_CLIENT_SECRET?: string;

  @IsOptional()
  @IsString()
  OAUTH_REDIRECT_URI?: string;

  @Transform(list)
  @IsString({ each: true })
  OAUTH_SCOPES: string[] = ['read_menu', 'read_orders', 'read_stores'];

  @Transform(list)
  @IsIn(SPEC_EVENT_NAMES, {
    each: true,
    message: `ENABLED_EVENTS must list event names of the spec (${SPEC_EVENT_NAMES.join(', ')})`,
  })
  ENABLED_EVENTS: string[] = [...SPEC_EVENT_NAMES];

  @Transform(list)
  @IsString({ each: true })
  @MinLength(16, { each: true, message: 'WEBHOOK_KEYS entries must be at least 16 characters' })
  @Matches(/^[A-Za-z0-9_~.-]+$/, { each: true, message: 'WEBHOOK_KEYS entries must be URL-safe (A-Z a-z 0-9 _ ~ . -)' })
  @ArrayMaxSize(100)
  WEBHOOK_KEYS: string[] = [];

  /** Bearer tokens of `/api`; `read:<token>` may only read, `admin:<token>` or a bare token may do everything (§12). */
  @Transform(list)
  @IsString({ each: true })
  @Matches(/^(?:(?:read|admin):.{16,}|(?!read:|admin:).{16,})$/s, {
    each: true,
    message: 'API_TOKENS entries must be tokens of at least 16 characters, each optionally prefixed read: or admin:',
  })
  API_TOKENS: string[] = [];

  get apiTokens(): ApiToken[] {
    return this.API_TOKENS.map((entry) => {
      const [, role, token] = /^(?:(read|admin):)?(.*)$/s.exec(entry)!;
      return { role: role === 'read' ? 'read' : 'admin', token };
    });
  }

  @ValidateIf((config: AppConfig) => config.DATABASE_URL !== undefined || config.TOKEN_ENCRYPTION_KEY !== undefined)
  @Matches(/^[A-Za-z0-9+/]{43}=$/, {
    message: 'TOKEN_ENCRYPTION_KEY must be 32 bytes in base64, and is required with DATABASE_URL',
  })
  TOKEN_ENCRYPTION_KEY?: string;

  @Transform(int)
  @IsInt()
  @Min(1024)
  @Max(64 * 1024 * 1024)
  WEBHOOK_MAX_BODY_BYTES = 1048576;

  /** Unset: the spread schedule (RECONCILE_INTERVAL); a cron expression: passes on it instead; `off`: neither. */
  @IsOptional()
  @Matches(/^(off|(\S+\s+){4,5}\S+)$/, { message: 'RECONCILE_CRON must be a cron expression of 5 or 6 fields, or off' })
  RECONCILE_CRON?: string;

  /** Each store is reconciled once per this, spread over it (reference §13), unless RECONCILE_CRON is set. */
  @Matches(DURATION, { message: 'RECONCILE_INTERVAL must be a duration such as 6h, 30m or 90s' })
  RECONCILE_INTERVAL = '6h';

  /** A connection with no delivery for this long while others' arrive has its stores reconciled first. */
  @Matches(DURATION, { message: 'RECONCILE_SILENCE_AFTER must be a duration such as 1h, 30m or 90s' })
  RECONCILE_SILENCE_AFTER = '1h';

  /** Every reconcile process stopped for this long: every store is reconciled first when one starts again. */
  @Matches(DURATION, { message: 'RECONCILE_DOWNTIME_AFTER must be a duration such as 5m, 1h or 90s' })
  RECONCILE_DOWNTIME_AFTER = '5m';

  get reconcileSchedule(): {
    mode: 'spread' | 'cron' | 'off';
    intervalMs: number;
    silenceMs: number;
    downtimeMs: number;
  } {
    const cron = this.RECONCILE_CRON;
    return {
      mode: cron === undefined ? 'spread' : cron === 'off' ? 'off' : 'cron',
      intervalMs: Math.max(1000, durationMs(this.RECONCILE_INTERVAL)),
      silenceMs: durationMs(this.RECONCILE_SILENCE_AFTER),
      downtimeMs: durationMs(this.RECONCILE_DOWNTIME_AFTER),
    };
  }

  @Transform(list)
  @IsString({ each: true })
  STORE_IDS: string[] = [];

  @IsIn(LOG_LEVELS)
  LOG_LEVEL: LogLevel = 'info';

  /** `auto`: readable lines (pino-pretty) on a terminal, JSON lines otherwise; `json` or `pretty` force one. */
  @IsIn(['auto', 'json', 'pretty'], { message: 'LOG_FORMAT must be auto, json or pretty' })
  LOG_FORMAT: 'auto' | 'json' | 'pretty' = 'auto';

  /**
   * How far V8 lets the heap grow past what the last full collection kept, in percent; 0 leaves it
   * to V8, which lets a busy daemon's heap reach several times its live data (docs/runtime.md).
   */
  @Transform(int)
  @IsInt()
  @Min(0)
  @Max(400)
  HEAP_GROWTH_PERCENT = 40;

  @Transform(bool)
  @IsBoolean()
  MIGRATIONS_RUN = true;

  /**
   * With no upstream configured, run the built-in emulator as the upstream (the zero-config
   * sandbox, docs/reference.md §1). Unset: only with the embedded database — a daemon on a shared
   * PostgreSQL without an upstream (an ingest-only replica, say) must not add demo data to its log.
   * A configured upstream switches it off.
   */
  @IsOptional()
  @Transform(bool)
  @IsBoolean()
  SANDBOX?: boolean;

  /** The roles this process holds: a comma list of ROLE_NAMES. */
  @Transform(list)
  @IsIn(ROLE_NAMES, {
    each: true,
    message: `ROLES must list roles among ${ROLE_NAMES.join(', ')} (comma-separated)`,
  })
  @ArrayMinSize(1, { message: `ROLES must name at least one of ${ROLE_NAMES.join(', ')}` })
  ROLES: string[] = [...ROLE_NAMES];

  /** The older switch of the projector role: `false` takes `projector` out of ROLES. */
  @Transform(bool)
  @IsBoolean()
  PROJECTOR_ENABLED = true;

  /** The roles this process holds, in the order of ROLE_NAMES. */
  get roles(): Role[] {
    return ROLE_NAMES.filter((role) => this.hasRole(role));
  }

  hasRole(role: Role): boolean {
    return this.ROLES.includes(role) && (role !== 'projector' || this.PROJECTOR_ENABLED);
  }

  /** Connections in the daemon's PostgreSQL pool. */
  @Transform(int)
  @IsInt()
  @Min(2)
  @Max(200)
  DATABASE_POOL_SIZE = 10;

  /**
   * Seconds a pooled PostgreSQL connection may stay idle before it is closed (0: never). Long, so
   * that reads find sessions that have already grown into the memory they need (a fresh session's
   * first big read is far slower; docs/benchmarks.md, Sessions).
   */
  @Transform(int)
  @IsInt()
  @Min(0)
  @Max(86400)
  DATABASE_POOL_IDLE_SECONDS = 600;

  /** How long an ingress append may wait for its commit before the delivery gets 503. */
  @Transform(int)
  @IsInt()
  @Min(100)
  @Max(60000)
  APPEND_TIMEOUT_MS = 5000;

  /** Rejected bodies kept in the quarantine; older ones are pruned. */
  @Transform(int)
  @IsInt()
  @Min(0)
  @Max(1000000)
  QUARANTINE_MAX_ENTRIES = 1000;

  /** How long a rejected body is kept in the quarantine (besides QUARANTINE_MAX_ENTRIES): `30d`, `12h`, `15m`, `30s`. */
  @Matches(DURATION, { message: 'QUARANTINE_RETENTION must be a duration such as 30d, 12h, 15m or 30s' })
  QUARANTINE_RETENTION = '30d';

  /** Positions per partition of the event log; the next one is made when the head is within half of one of the last bound. */
  @Transform(int)
  @IsInt({ message: 'EVENT_LOG_PARTITION_SIZE must be an integer from 1000 to 1000000000' })
  @Min(1000)
  @Max(1_000_000_000)
  EVENT_LOG_PARTITION_SIZE = 1_000_000;

  /** Closed partitions of the event log whose newest entry is older than this are archived (`90d`, `12h`); unset: never by itself. */
  @IsOptional()
  @Matches(DURATION, { message: 'ARCHIVE_AFTER must be a duration such as 90d, 12h or 30m' })
  ARCHIVE_AFTER?: string;

  /** Where the archive's files and manifest go (a directory, any mounted storage). */
  @IsString()
  @MinLength(1, { message: 'ARCHIVE_DIR must name a directory' })
  ARCHIVE_DIR = './archive';

  /** ARCHIVE_AFTER in milliseconds, or null when unset (no archiving on a schedule). */
  get archiveAfterMs(): number | null {
    return this.ARCHIVE_AFTER === undefined || this.ARCHIVE_AFTER === '' ? null : durationMs(this.ARCHIVE_AFTER);
  }

  /** The menu snapshot path template of reconcile (reference §7): `{store_id}` and `{resources}` are filled in. */
  @Matches(/^\/\S*\{store_id\}\S*\{resources\}\S*$/, {
    message: 'UPSTREAM_SNAPSHOT_PATH must be a path containing {store_id} and {resources}',
  })
  UPSTREAM_SNAPSHOT_PATH = '/stores/{store_id}/{resources}';

  /** The order list path of reconcile (spec endpoint 3). */
  @Matches(/^\/\S*\{store_id\}\S*$/, { message: 'UPSTREAM_ORDERS_PATH must be a path containing {store_id}' })
  UPSTREAM_ORDERS_PATH = '/stores/{store_id}/orders';

  /** Reconcile destroys nothing when a snapshot lacks more than this share of the mirrored resources of a type. */
  @Transform(({ value }) => (value === undefined || value === '' ? value : Number(value)))
  @Min(0)
  @Max(1)
  RECONCILE_MAX_DESTROY_RATIO = 0.5;

  /** Pages reconcile follows per snapshot document before it calls the snapshot incomplete. */
  @Transform(int)
  @IsInt()
  @Min(1)
  @Max(10000)
  RECONCILE_MAX_PAGES = 100;

  /** Upstream requests reconcile keeps in flight at once in this process (reference §13). */
  @Transform(int)
  @IsInt({ message: 'RECONCILE_CONCURRENCY must be an integer from 1 to 256' })
  @Min(1)
  @Max(256)
  RECONCILE_CONCURRENCY = 8;

  /** Seconds one store's snapshot may take, its retries and waits included, before it is given up and tried again later. */
  @Transform(int)
  @IsInt({ message: 'RECONCILE_STORE_TIMEOUT must be a whole number of seconds from 1 to 3600' })
  @Min(1)
  @Max(3600)
  RECONCILE_STORE_TIMEOUT = 300;

  /** Requests per second to `{base_url}` per connection, from this process (docs/upstream.md). */
  @Transform(({ value }) => (typeof value === 'string' && /^\d+(\.\d+)?$/.test(value) ? Number(value) : value))
  @IsNumber({}, { message: 'UPSTREAM_RATE_LIMIT must be a number of requests per second above 0, at most 1000' })
  @Min(0.01)
  @Max(1000)
  UPSTREAM_RATE_LIMIT = 10;

  /** How long a sink may fail before it is shown `failing` (reference §11): a number and a unit (ms, s, m, h, d). */
  @Matches(DURATION, { message: 'SINK_FAILING_AFTER must be a duration such as 72h, 30m or 90s' })
  SINK_FAILING_AFTER = '72h';

  /** How long a sink that delivered before may fail before `status` and the console say it needs attention. */
  @Matches(DURATION, { message: 'SINK_ATTENTION_AFTER must be a duration such as 5m, 30s or 1h' })
  SINK_ATTENTION_AFTER = '5m';

  /** The daemon the CLI asks instead of opening its database (`status`, `sinks`): e.g. http://127.0.0.1:3000. */
  @IsOptional()
  @Matches(/^https?:\/\/[^\s/]+(\/\S*)?$/, {
    message: 'MENU_SYNC_URL must be an http(s) URL such as http://127.0.0.1:3000',
  })
  MENU_SYNC_URL?: string;

  /** The bearer token the CLI sends to MENU_SYNC_URL (one of API_TOKENS, or a stored token). */
  @IsOptional()
  @IsString()
  MENU_SYNC_TOKEN?: string;

  /** NATS for `nats` sinks (docs/reference.md §11); unset: creating one is refused. */
  @IsOptional()
  @Matches(/^(nats|tls|wss?):\/\/\S+$|^[\w.-]+:\d+$/, {
    message: 'NATS_URL must be a NATS server URL such as nats://127.0.0.1:4222',
  })
  NATS_URL?: string;

  /**
   * Networks http and table sinks may reach besides public unicast addresses (docs/reference.md §12):
   * comma-separated CIDRs, e.g. `127.0.0.0/8,::1/128`; empty: none.
   */
  @Transform(list)
  @IsArray()
  @Validate(IsNetwork, { each: true })
  SINK_ALLOWED_NETWORKS: string[] = [];

  get sinkAllowedNetworks(): Network[] {
    return this.SINK_ALLOWED_NETWORKS.map((cidr) => parseNetwork(cidr)!);
  }

  get sinkFailingAfterMs(): number {
    return durationMs(this.SINK_FAILING_AFTER);
  }

  get sinkAttentionAfterMs(): number {
    return durationMs(this.SINK_ATTENTION_AFTER);
  }

  /** Resource types whose changes are published (reference §11): `product`, `collection`, …; `none` publishes nothing. */
  @Transform(list)
  @Validate(IsChangeTypes)
  CHANGES_TYPES: string[] = ['collection', 'product', 'trait', 'trait_option'];

  /** How long every change is kept before compaction keeps only the newest per resource: `30d`, `12h`, `15m`, `30s`. */
  @Matches(DURATION, { message: 'CHANGES_RETENTION must be a duration such as 30d, 12h, 15m or 30s' })
  CHANGES_RETENTION = '30d';

  /** How long each sink's delivery attempts are kept (at most 1,000 per sink): `7d`, `12h`, `15m`, `30s`. */
  @Matches(DURATION, { message: 'SINK_ATTEMPTS_RETENTION must be a duration such as 7d, 12h, 15m or 30s' })
  SINK_ATTEMPTS_RETENTION = '7d';

  /** How long audit log entries are kept: `90d`, `12h`, `15m`, `30s`. */
  @Matches(DURATION, { message: 'AUDIT_RETENTION must be a duration such as 90d, 12h, 15m or 30s' })
  AUDIT_RETENTION = '90d';

  /** How long the activity history (counts per minute, `GET /api/v1/activity`) is kept: `7d`, `12h`, `15m`, `30s`. */
  @Matches(DURATION, { message: 'ACTIVITY_RETENTION must be a duration such as 7d, 12h, 15m or 30s' })
  ACTIVITY_RETENTION = '7d';

  /** How many sinks get series labelled by `sink` (the most lagging or failing); the others are counted by `kind` only. */
  @Transform(int)
  @IsInt({ message: 'METRICS_SINK_SERIES must be an integer of 0 or more' })
  @Min(0)
  METRICS_SINK_SERIES = 20;

  /** Disk space for serialised live `/menu` bodies, reused while an owner's menu is unchanged; 0: none kept. */
  @Transform(int)
  @IsInt({ message: 'MENU_CACHE_MB must be an integer from 0 to 65536' })
  @Min(0)
  @Max(65536)
  MENU_CACHE_MB = 1024;

  /** Where the kept `/menu` bodies go (a directory of this process's own is made in it); the system's temporary directory by default. */
  @IsOptional()
  @IsString()
  @MinLength(1)
  MENU_CACHE_DIR?: string;

  /**
   * How long a kept `/menu` body waits, before each MiB it sends, and a `/menu` being built, before
   * each chunk it asks PostgreSQL for, for the webhook deliveries in flight to be answered (at
   * most); 0: never. Ingress goes first; a fast client of a big kept menu reads at least ~1 MiB per
   * this many milliseconds while deliveries keep arriving.
   */
  @Transform(int)
  @IsInt({ message: 'MENU_YIELD_MS must be an integer from 0 to 1000' })
  @Min(0)
  @Max(1000)
  MENU_YIELD_MS = 10;

  get changeTypes(): string[] {
    return [...new Set(this.CHANGES_TYPES.filter((name) => name !== 'none'))];
  }

  get changesRetentionMs(): number {
    return durationMs(this.CHANGES_RETENTION);
  }

  get sinkAttemptsRetentionMs(): number {
    return durationMs(this.SINK_ATTEMPTS_RETENTION);
  }

  get auditRetentionMs(): number {
    return durationMs(this.AUDIT_RETENTION);
  }

  get activityRetentionMs(): number {
    return durationMs(this.ACTIVITY_RETENTION);
  }

  get quarantineRetentionMs(): number {
    return durationMs(this.QUARANTINE_RETENTION);
  }

  get hasUpstream(): boolean {
    return this.UPSTREAM_AUTH_URL !== undefined || this.UPSTREAM_BASE_URL !== undefined;
  }

  get embeddedDatabase(): boolean {
    return this.DATABASE_URL === undefined;
  }

  /** Whether this daemon runs the zero-config sandbox (see SANDBOX). */
  get sandbox(): boolean {
    return !this.hasUpstream && (this.SANDBOX ?? this.embeddedDatabase);
  }

  #boundPort?: number;

  /** The port actually listened on (differs from PORT when PORT=0). */
  bindPort(port: number): void {
    this.#boundPort = port;
  }

  get publicUrl(): string {
    return (this.PUBLIC_URL ?? `http://127.0.0.1:${this.#boundPort ?? this.PORT}`).replace(/\/+$/, '');
  }

  get redirectUri(): string {
    return this.OAUTH_REDIRECT_URI ?? `${this.publicUrl}/auth/callback`;
  }

  /** Every variable with its value, secrets masked: safe to log. */
  dump(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(this)) {
      if (value === undefined) continue;
      out[name] = SECRET_VARIABLES.has(name) ? mask(value) : value;
    }
    return out;
  }
}

function mask(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(() => '********');
  return '********';
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** Variables without a default, which a fresh AppConfig may not list among its own keys. */
const OPTIONAL_VARIABLES = [
  'DATABASE_URL',
  'DATABASE_READ_URL',
  'DATABASE_MIGRATION_URL',
  'DATABASE_SSL_ROOT_CERT',
  'DATABASE_DIRECT_URL',
  'DATABASE_PREPARED_STATEMENTS',
  'PUBLIC_URL',
  'UPSTREAM_AUTH_URL',
  'UPSTREAM_BASE_URL',
  'OAUTH_CLIENT_ID',
  'OAUTH_CLIENT_SECRET',
  'OAUTH_REDIRECT_URI',
  'TOKEN_ENCRYPTION_KEY',
  'NATS_URL',
  'MENU_SYNC_URL',
  'MENU_SYNC_TOKEN',
  'RECONCILE_CRON',
];

/** Every environment variable loadConfig reads, in the order AppConfig declares them. */
export function configVariables(): string[] {
  return [...new Set([...Object.keys(new AppConfig()), ...OPTIONAL_VARIABLES])];
}

export interface LoadOptions {
  /** false: a command that seals and opens nothing (`migrate`, `status`) runs without TOKEN_ENCRYPTION_KEY. */
  encryptionKey?: boolean;
}

/**
 * Builds and validates the configuration from an environment. Empty strings count as unset.
 * Throws ConfigError naming every offending variable (never echoing a secret's value).
 */
export function loadConfig(
  env: Record<string, string | undefined>,
  { encryptionKey = true }: LoadOptions = {},
): AppConfig {
  const plain: Record<string, string> = {};
  for (const name of configVariables()) {
    const value = env[name];
    if (value !== undefined && value.trim() !== '') plain[name] = value.trim();
  }
  const config = plainToInstance(AppConfig, plain, { exposeDefaultValues: true });
  const errors = validateSync(config, { forbidUnknownValues: false }).filter(
    (error) => encryptionKey || error.property !== 'TOKEN_ENCRYPTION_KEY' || config.TOKEN_ENCRYPTION_KEY !== undefined,
  );
  if (errors.length > 0) throw new ConfigError(errors.map(describe));
  return config;
}

function describe(error: ValidationError): string {
  const messages = Object.values(error.constraints ?? {});
  const text = messages
    .map((m) => (SECRET_VARIABLES.has(error.property) ? m.replace(String(error.value), '********') : m))
    .join('; ');
  return `${error.property}: ${text}`;
}
