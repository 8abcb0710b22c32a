import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { describeRun, runCli } from './support/cli.js';
import { DaemonProcess, daemonEnv } from './support/daemon-process.js';
import { deliver, WEBHOOK_KEY } from './support/http.js';
import { startTlsCluster, TlsCluster } from './support/tls-postgres.js';
import { webhookEvent } from './support/webhook-events.js';

/**
 * docs/reference.md §13, TLS, from the outside: `menu-sync migrate` and `serve` on a PostgreSQL that
 * takes TLS only (a cluster of the test's own, its certificate from a CA the test made), with
 * DATABASE_SSL_ROOT_CERT. The wrong CA or a host the certificate lacks stops the command with exit
 * 1 and the TLS error; the right one migrates and serves, every session of the daemon encrypted.
 * Neither the password nor the URL is ever written out.
 */
describe('the daemon on a TLS-only PostgreSQL', () => {
  let cluster: TlsCluster;
  let dir: string;
  let daemon: DaemonProcess | undefined;
  const env = (url: string, rootCert: string) =>
    daemonEnv({
      DATABASE_URL: url,
      DATABASE_SSL_ROOT_CERT: rootCert,
      DATA_DIR: dir,
      WEBHOOK_KEYS: WEBHOOK_KEY,
      LOG_LEVEL: 'debug',
    });

  beforeAll(async () => {
    cluster = await startTlsCluster();
    dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-tls-e2e-'));
    const admin = new pg.Client({
      connectionString: cluster.url('127.0.0.1', `sslmode=verify-full&sslrootcert=${cluster.caFile}`),
    });
    await admin.connect();
    await admin.query('CREATE DATABASE menu_sync');
    await admin.end();
  }, 120_000);

  afterAll(async () => {
    if (daemon !== undefined) {
      daemon.kill('SIGTERM');
      await daemon.waitForExit(15_000).catch(() => undefined);
    }
    await cluster?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  const expectNothingSecret = (output: string) => {
    expect(output).not.toContain(cluster.password);
    expect(output).not.toContain(`:${cluster.port}/menu_sync`);
  };

  it('migrate and serve refuse a CA other than the server certificate’s, and a host it does not name, in one line', async () => {
    const cases: Array<[string, string[], string, string, string]> = [
      [
        'migrate',
        ['migrate'],
        cluster.url('127.0.0.1', '', 'menu_sync'),
        cluster.otherCaFile,
        `TLS to PostgreSQL at 127.0.0.1:${cluster.port} refused (sslmode=verify-full): unable to verify the first certificate (UNABLE_TO_VERIFY_LEAF_SIGNATURE)`,
      ],
      [
        'serve',
        ['serve'],
        cluster.url('127.0.0.2', 'sslmode=verify-full', 'menu_sync'),
        cluster.caFile,
        `TLS to PostgreSQL at 127.0.0.2:${cluster.port} refused (sslmode=verify-full): Hostname/IP does not match certificate's altnames: IP: 127.0.0.2 is not in the cert's list: 127.0.0.1 (ERR_TLS_CERT_ALTNAME_INVALID)`,
      ],
    ];
    for (const [command, args, url, rootCert, message] of cases) {
      const result = await runCli(args, { ...env(url, rootCert), MIGRATIONS_RUN: 'false', PORT: '0' }, dir, 30_000);
      expect({ command, code: result.code, run: describeRun(result) }).toMatchObject({ command, code: 1 });
      const output = result.stderr + result.stdout;
      expect(output).toContain(message);
      expect(output).not.toContain('fingerprint');
      expectNothingSecret(output);
    }
  }, 60_000);

  it('migrates and serves with the right CA (verify-full), every session of the daemon over TLS', async () => {
    const url = cluster.url('localhost', 'sslmode=verify-full', 'menu_sync');
    const migrated = await runCli(['migrate'], env(url, cluster.caFile), dir);
    expect({ code: migrated.code, run: describeRun(migrated) }).toMatchObject({ code: 0 });
    daemon = await DaemonProcess.start({ cwd: dir, env: env(url, cluster.caFile) });
    expect((await deliver(daemon.url, webhookEvent())).status).toBe(202);
    const watch = new pg.Client({
      connectionString: cluster.url('127.0.0.1', `sslmode=verify-full&sslrootcert=${cluster.caFile}`),
    });
    await watch.connect();
    try {
      const { rows } = await watch.query(
        `SELECT s.ssl, count(*)::int AS sessions FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
          WHERE a.datname = 'menu_sync' AND a.application_name LIKE 'menu-sync%' GROUP BY s.ssl`,
      );
      expect(rows).toEqual([{ ssl: true, sessions: expect.any(Number) }]);
      expect(rows[0].sessions).toBeGreaterThanOrEqual(2);
    } finally {
      await watch.end();
    }
    expectNothingSecret(daemon.logs);
  }, 120_000);
});
