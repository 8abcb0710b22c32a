import { ConfigError, loadConfig } from './app-config.js';

const KEY = Buffer.alloc(32, 7).toString('base64');

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('loadConfig', () => {
  it('has the contract defaults with an empty environment (embedded mode)', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      DATA_DIR: './data',
      HOST: '0.0.0.0',
      PORT: 3000,
      UPSTREAM_MEDIA_TYPE: 'application/vnd.service.v2',
      OAUTH_SCOPES: ['read_menu', 'read_orders', 'read_stores'],
      WEBHOOK_KEYS: [],
      API_TOKENS: [],
      WEBHOOK_MAX_BODY_BYTES: 1048576,
      RECONCILE_INTERVAL: '6h',
      LOG_LEVEL: 'info',
      MIGRATIONS_RUN: true,
      DATABASE_POOL_SIZE: 10,
      DATABASE_POOL_IDLE_SECONDS: 600,
    });
    expect(config.ENABLED_EVENTS).toHaveLength(14);
    expect(config.embeddedDatabase).toBe(true);
    expect(config.publicUrl).toBe('http://127.0.0.1:3000');
    expect(config.redirectUri).toBe('http://127.0.0.1:3000/auth/callback');
  });

  it('parses lists, numbers and booleans', () => {
    const config = loadConfig({
      WEBHOOK_KEYS: 'aaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbb',
      PORT: '8080',
      MIGRATIONS_RUN: 'false',
      OAUTH_SCOPES: 'read_menu write_menu',
      STORE_IDS: '1,2',
    });
    expect(config).toMatchObject({
      WEBHOOK_KEYS: ['aaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbb'],
      PORT: 8080,
      MIGRATIONS_RUN: false,
      OAUTH_SCOPES: ['read_menu', 'write_menu'],
      STORE_IDS: ['1', '2'],
    });
  });

  it('ROLES: every role by default, a comma list, PROJECTOR_ENABLED=false taking the projector out; an unknown role named', () => {
    expect(loadConfig({}).roles).toEqual(['ingress', 'api', 'projector', 'sinks', 'reconcile', 'console']);
    expect(loadConfig({ ROLES: 'sinks, projector,reconcile' }).roles).toEqual(['projector', 'sinks', 'reconcile']);
    expect(loadConfig({ PROJECTOR_ENABLED: 'false' }).roles).toEqual([
      'ingress',
      'api',
      'sinks',
      'reconcile',
      'console',
    ]);
    expect(loadConfig({ ROLES: 'ingress,projector', PROJECTOR_ENABLED: 'false' }).hasRole('projector')).toBe(false);
    expect(problems({ ROLES: 'ingress,worker' })).toEqual([
      'ROLES: ROLES must list roles among ingress, api, projector, sinks, reconcile, console (comma-separated)',
    ]);
    expect(problems({ ROLES: ',' })).toEqual([
      'ROLES: ROLES must name at least one of ingress, api, projector, sinks, reconcile, console',
    ]);
  });

  it('reconcile: the spread schedule unless RECONCILE_CRON is set (then passes on it), neither with off; durations checked', () => {
    expect(loadConfig({}).RECONCILE_CRON).toBeUndefined();
    expect(loadConfig({}).reconcileSchedule).toEqual({
      mode: 'spread',
      intervalMs: 21_600_000,
      silenceMs: 3_600_000,
      downtimeMs: 300_000,
    });
    expect(loadConfig({ RECONCILE_CRON: '0 */15 * * * *' }).reconcileSchedule.mode).toBe('cron');
    expect(loadConfig({ RECONCILE_CRON: 'off' }).reconcileSchedule.mode).toBe('off');
    expect(loadConfig({ RECONCILE_INTERVAL: '90s' }).reconcileSchedule.intervalMs).toBe(90_000);
    expect(
      problems({ RECONCILE_INTERVAL: 'often', RECONCILE_SILENCE_AFTER: '1 hour', RECONCILE_DOWNTIME_AFTER: '-5m' })
        .map((problem) => problem.split(':')[0])
        .sort(),
    ).toEqual(['RECONCILE_DOWNTIME_AFTER', 'RECONCILE_INTERVAL', 'RECONCILE_SILENCE_AFTER']);
  });

  it('takes LOG_FORMAT auto (default), json or pretty, and refuses anything else', () => {
    expect(loadConfig({}).LOG_FORMAT).toBe('auto');
    expect(loadConfig({ LOG_FORMAT: 'json' }).LOG_FORMAT).toBe('json');
    expect(problems({ LOG_FORMAT: 'yaml' })).toEqual([expect.stringMatching(/^LOG_FORMAT: /)]);
  });

  it('names every offending variable at once', () => {
    const found = problems({
      PORT: 'abc',
      LOG_LEVEL: 'loud',
      ENABLED_EVENTS: 'order.created,order.exploded',
      WEBHOOK_MAX_BODY_BYTES: '-1',
      RECONCILE_CRON: 'sometimes',
    });
    expect(found.map((p) => p.split(':')[0]).sort()).toEqual([
      'ENABLED_EVENTS',
      'LOG_LEVEL',
      'PORT',
      'RECONCILE_CRON',
      'WEBHOOK_MAX_BODY_BYTES',
    ]);
  });

  it('requires TOKEN_ENCRYPTION_KEY with DATABASE_URL, and client credentials with an upstream', () => {
    expect(problems({ DATABASE_URL: 'postgres://db/x' }).join()).toMatch(/TOKEN_ENCRYPTION_KEY/);
    expect(problems({ DATABASE_URL: 'postgres://db/x', TOKEN_ENCRYPTION_KEY: KEY })).toEqual([]);
    const upstream = problems({ UPSTREAM_AUTH_URL: 'https://auth.example', UPSTREAM_BASE_URL: 'https://api.example' });
    expect(upstream.map((p) => p.split(':')[0]).sort()).toEqual(['OAUTH_CLIENT_ID', 'OAUTH_CLIENT_SECRET']);
    expect(
      problems({ UPSTREAM_AUTH_URL: 'https://auth.example', OAUTH_CLIENT_ID: 'a', OAUTH_CLIENT_SECRET: 'b' }).join(),
    ).toMatch(/UPSTREAM_BASE_URL/);
  });

  it('never echoes a secret, neither in errors nor in the dump', () => {
    const secret = 'postgres-but-not-a-url-s3cr3t';
    expect(problems({ DATABASE_URL: secret, TOKEN_ENCRYPTION_KEY: 'short-s3cr3t' }).join()).not.toMatch(/s3cr3t/);
    const config = loadConfig({
      DATABASE_URL: 'postgres://u:pw-s3cr3t@db/x',
      TOKEN_ENCRYPTION_KEY: KEY,
      API_TOKENS: 'token-s3cr3t-0123456789',
      WEBHOOK_KEYS: 'key-s3cr3t-0123456789',
    });
    expect(JSON.stringify(config.dump())).not.toMatch(/s3cr3t|pw-|AAAA|BwcH/);
  });

  it('API_TOKENS: read:<token> may only read, admin:<token> and a bare token may do everything (§12)', () => {
    const tokens = 'read:reader-0123456789abcdef,admin:admin-0123456789abcdef,bare-0123456789abcdef';
    expect(loadConfig({ API_TOKENS: tokens }).apiTokens).toEqual([
      { role: 'read', token: 'reader-0123456789abcdef' },
      { role: 'admin', token: 'admin-0123456789abcdef' },
      { role: 'admin', token: 'bare-0123456789abcdef' },
    ]);
    // The token after the prefix is what must be long enough.
    for (const entry of ['read:0123456789a', 'admin:short', '0123456789abcde']) {
      expect(problems({ API_TOKENS: entry })).toEqual([
        'API_TOKENS: API_TOKENS entries must be tokens of at least 16 characters, each optionally prefixed read: or admin:',
      ]);
    }
  });

  it('CHANGES_TYPES: the menu types by default, resource types in the singular, none for off; CHANGES_RETENTION as a duration', () => {
    expect(loadConfig({}).changeTypes).toEqual(['collection', 'product', 'trait', 'trait_option']);
    expect(loadConfig({ CHANGES_TYPES: 'product,order,store,product' }).changeTypes).toEqual([
      'product',
      'order',
      'store',
    ]);
    expect(loadConfig({ CHANGES_TYPES: 'order_product_trait_option trait' }).changeTypes).toEqual([
      'order_product_trait_option',
      'trait',
    ]);
    expect(loadConfig({ CHANGES_TYPES: 'none' }).changeTypes).toEqual([]);
    expect(loadConfig({}).changesRetentionMs).toBe(30 * 86_400_000);
    expect(loadConfig({ CHANGES_RETENTION: '90s' }).changesRetentionMs).toBe(90_000);
    expect(problems({ CHANGES_TYPES: 'product,widgets', CHANGES_RETENTION: 'a month' })).toEqual([
      'CHANGES_TYPES: widgets is not a resource type (collection, product, trait, trait_option, order, order_product, order_product_trait_option, store, none)',
      'CHANGES_RETENTION: CHANGES_RETENTION must be a duration such as 30d, 12h, 15m or 30s',
    ]);
  });

  it('CHANGES_TYPES: a plural (an API collection name) stops the start, naming the singular to write', () => {
    expect(problems({ CHANGES_TYPES: 'products' })).toEqual([
      'CHANGES_TYPES: products is a collection name; the type is product',
    ]);
    expect(problems({ CHANGES_TYPES: 'collections,product,order_product_trait_options' })).toEqual([
      'CHANGES_TYPES: collections, order_product_trait_options are collection names; the types are collection, order_product_trait_option',
    ]);
  });

  it('DATABASE_READ_URL: a PostgreSQL URL, masked; READ_REPLICA_MAX_LAG: 5 s by default, a duration', () => {
    expect(loadConfig({}).DATABASE_READ_URL).toBeUndefined();
    expect(loadConfig({}).readReplicaMaxLagMs).toBe(5000);
    const config = loadConfig({ DATABASE_READ_URL: 'postgres://u:pw-s3cr3t@replica/x', READ_REPLICA_MAX_LAG: '500ms' });
    expect(config.DATABASE_READ_URL).toBe('postgres://u:pw-s3cr3t@replica/x');
    expect(config.readReplicaMaxLagMs).toBe(500);
    expect(JSON.stringify(config.dump())).not.toMatch(/s3cr3t/);
    expect(problems({ DATABASE_READ_URL: 'mysql://replica-s3cr3t/x', READ_REPLICA_MAX_LAG: '5' })).toEqual([
      'DATABASE_READ_URL: DATABASE_READ_URL must be a postgres:// or postgresql:// URL',
      'READ_REPLICA_MAX_LAG: READ_REPLICA_MAX_LAG must be a duration such as 5s, 500ms or 1m',
    ]);
  });

  it('DATABASE_DIRECT_URL: a PostgreSQL URL, masked; DATABASE_PREPARED_STATEMENTS on unless it is set, on|off', () => {
    expect(loadConfig({}).DATABASE_DIRECT_URL).toBeUndefined();
    expect(loadConfig({}).preparedStatements).toBe(true);
    const config = loadConfig({ DATABASE_DIRECT_URL: 'postgres://u:pw-s3cr3t@db:5432/x' });
    expect(config.DATABASE_DIRECT_URL).toBe('postgres://u:pw-s3cr3t@db:5432/x');
    expect(config.preparedStatements).toBe(false);
    expect(JSON.stringify(config.dump())).not.toMatch(/s3cr3t/);
    expect(
      loadConfig({ DATABASE_DIRECT_URL: 'postgres://db/x', DATABASE_PREPARED_STATEMENTS: 'on' }).preparedStatements,
    ).toBe(true);
    expect(loadConfig({ DATABASE_PREPARED_STATEMENTS: 'off' }).preparedStatements).toBe(false);
    expect(problems({ DATABASE_DIRECT_URL: 'mysql://db-s3cr3t/x', DATABASE_PREPARED_STATEMENTS: 'yes' })).toEqual([
      'DATABASE_DIRECT_URL: DATABASE_DIRECT_URL must be a postgres:// or postgresql:// URL',
      'DATABASE_PREPARED_STATEMENTS: DATABASE_PREPARED_STATEMENTS must be on or off',
    ]);
  });

  it('SINK_ATTEMPTS_RETENTION: 7 days by default, a duration, anything else named', () => {
    expect(loadConfig({}).sinkAttemptsRetentionMs).toBe(7 * 86_400_000);
    expect(loadConfig({ SINK_ATTEMPTS_RETENTION: '12h' }).sinkAttemptsRetentionMs).toBe(12 * 3_600_000);
    expect(problems({ SINK_ATTEMPTS_RETENTION: 'a week' })).toEqual([
      'SINK_ATTEMPTS_RETENTION: SINK_ATTEMPTS_RETENTION must be a duration such as 7d, 12h, 15m or 30s',
    ]);
  });

  it('ACTIVITY_RETENTION: 7 days by default, a duration, anything else named', () => {
    expect(loadConfig({}).activityRetentionMs).toBe(7 * 86_400_000);
    expect(loadConfig({ ACTIVITY_RETENTION: '90s' }).activityRetentionMs).toBe(90_000);
    expect(problems({ ACTIVITY_RETENTION: 'a week' })).toEqual([
      'ACTIVITY_RETENTION: ACTIVITY_RETENTION must be a duration such as 7d, 12h, 15m or 30s',
    ]);
  });

  it('AUDIT_RETENTION: 90 days by default, a duration, anything else named', () => {
    expect(loadConfig({}).auditRetentionMs).toBe(90 * 86_400_000);
    expect(loadConfig({ AUDIT_RETENTION: '30s' }).auditRetentionMs).toBe(30_000);
    expect(problems({ AUDIT_RETENTION: 'forever' })).toEqual([
      'AUDIT_RETENTION: AUDIT_RETENTION must be a duration such as 90d, 12h, 15m or 30s',
    ]);
  });

  it('ARCHIVE_AFTER: off by default, a duration, anything else named; ARCHIVE_DIR ./archive by default', () => {
    expect(loadConfig({}).archiveAfterMs).toBeNull();
    expect(loadConfig({ ARCHIVE_AFTER: '90d' }).archiveAfterMs).toBe(90 * 86_400_000);
    expect(loadConfig({}).ARCHIVE_DIR).toBe('./archive');
    expect(loadConfig({ ARCHIVE_DIR: '/mnt/bucket/menu-sync' }).ARCHIVE_DIR).toBe('/mnt/bucket/menu-sync');
    expect(loadConfig({ ARCHIVE_DIR: '' }).ARCHIVE_DIR).toBe('./archive');
    expect(problems({ ARCHIVE_AFTER: '3 months' })).toEqual([
      'ARCHIVE_AFTER: ARCHIVE_AFTER must be a duration such as 90d, 12h or 30m',
    ]);
  });

  it('METRICS_SINK_SERIES: 20 by default, 0 for none, anything but an integer of 0 or more named', () => {
    expect(loadConfig({}).METRICS_SINK_SERIES).toBe(20);
    expect(loadConfig({ METRICS_SINK_SERIES: '0' }).METRICS_SINK_SERIES).toBe(0);
    expect(loadConfig({ METRICS_SINK_SERIES: '500' }).METRICS_SINK_SERIES).toBe(500);
    for (const value of ['-1', '2.5', 'many'])
      expect(problems({ METRICS_SINK_SERIES: value })).toEqual([expect.stringMatching(/^METRICS_SINK_SERIES: /)]);
    expect(problems({ METRICS_SINK_SERIES: 'many' })[0]).toContain('must be an integer of 0 or more');
  });

  it('HEAP_GROWTH_PERCENT: 40 by default, 0 leaves it to V8, anything outside 0..400 named', () => {
    expect(loadConfig({}).HEAP_GROWTH_PERCENT).toBe(40);
    expect(loadConfig({ HEAP_GROWTH_PERCENT: '0' }).HEAP_GROWTH_PERCENT).toBe(0);
    for (const value of ['-1', '401', 'lots'])
      expect(problems({ HEAP_GROWTH_PERCENT: value })).toEqual([expect.stringMatching(/^HEAP_GROWTH_PERCENT: /)]);
  });

  it('RECONCILE_CONCURRENCY, RECONCILE_STORE_TIMEOUT, UPSTREAM_RATE_LIMIT: their defaults, and anything out of range named', () => {
    const defaults = loadConfig({});
    expect([defaults.RECONCILE_CONCURRENCY, defaults.RECONCILE_STORE_TIMEOUT, defaults.UPSTREAM_RATE_LIMIT]).toEqual([
      8, 300, 10,
    ]);
    const set = loadConfig({ RECONCILE_CONCURRENCY: '32', RECONCILE_STORE_TIMEOUT: '2', UPSTREAM_RATE_LIMIT: '0.5' });
    expect([set.RECONCILE_CONCURRENCY, set.RECONCILE_STORE_TIMEOUT, set.UPSTREAM_RATE_LIMIT]).toEqual([32, 2, 0.5]);
    for (const [name, value] of [
      ['RECONCILE_CONCURRENCY', '0'],
      ['RECONCILE_CONCURRENCY', '257'],
      ['RECONCILE_CONCURRENCY', 'many'],
      ['RECONCILE_STORE_TIMEOUT', '0'],
      ['RECONCILE_STORE_TIMEOUT', '1.5'],
      ['UPSTREAM_RATE_LIMIT', '0'],
      ['UPSTREAM_RATE_LIMIT', '1001'],
      ['UPSTREAM_RATE_LIMIT', 'fast'],
    ])
      expect({ value, found: problems({ [name]: value }) }).toEqual({
        value,
        found: [expect.stringMatching(new RegExp(`^${name}: `))],
      });
    expect(problems({ UPSTREAM_RATE_LIMIT: 'fast' })[0]).toContain(
      'must be a number of requests per second above 0, at most 1000',
    );
    expect(problems({ RECONCILE_CONCURRENCY: 'many' })[0]).toContain('must be an integer from 1 to 256');
  });
});
