import { inspect } from 'node:util';
import pg from 'pg';
import { startTlsCluster, TlsCluster } from '../../test/support/tls-postgres.js';
import { createDataSource } from './data-source.factory.js';
import { tlsReason, withRootCert } from './database-tls.js';
import { poolOfItsOwn } from './postgres-connection.js';

/**
 * docs/reference.md §13, TLS: the daemon's data sources against a PostgreSQL cluster of the test's
 * own that takes TLS only, with a certificate (for localhost and 127.0.0.1) from a CA the test
 * made. verify-full with that CA connects; another CA, or a host the certificate does not name
 * (127.0.0.2, still loopback), is refused with the TLS error; no error carries the password.
 */
describe('TLS to the daemon database', () => {
  let cluster: TlsCluster;

  beforeAll(async () => {
    cluster = await startTlsCluster();
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  /** What pg_stat_ssl says of the session a data source on `url` gets. */
  async function sessionTls(url: string): Promise<unknown> {
    const dataSource = createDataSource({ url, poolSize: 1 });
    await dataSource.initialize();
    try {
      const own = poolOfItsOwn(dataSource, { max: 1 });
      try {
        const sql = 'SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()';
        return { shared: await dataSource.query(sql), own: (await own.query(sql)).rows };
      } finally {
        await own.end();
      }
    } finally {
      await dataSource.destroy();
    }
  }

  async function refusal(url: string): Promise<string> {
    const error = await sessionTls(url).then(
      () => new Error('connected'),
      (refused: Error) => refused,
    );
    const text = `${inspect(error, { depth: 4 })} ${error.stack}`;
    expect(text).not.toContain(cluster.password);
    // Node 22.15+ adds a hint about its own trust store; the daemon drops it (tlsReason).
    return tlsReason(error.message);
  }

  const overTls = { shared: [{ ssl: true, version: 'TLSv1.3' }], own: [{ ssl: true, version: 'TLSv1.3' }] };

  it('verify-full with the CA that signed the certificate connects over TLS, by address and by name', async () => {
    expect(await sessionTls(withRootCert(cluster.url('127.0.0.1', 'sslmode=verify-full'), cluster.caFile))).toEqual(
      overTls,
    );
    expect(await sessionTls(cluster.url('localhost', `sslmode=verify-full&sslrootcert=${cluster.caFile}`))).toEqual(
      overTls,
    );
    // DATABASE_SSL_ROOT_CERT alone: verify-full.
    expect(await sessionTls(withRootCert(cluster.url('127.0.0.1'), cluster.caFile))).toEqual(overTls);
  });

  it('another CA is refused, whatever the host', async () => {
    for (const host of ['127.0.0.1', 'localhost']) {
      expect(await refusal(withRootCert(cluster.url(host, 'sslmode=verify-full'), cluster.otherCaFile))).toBe(
        'unable to verify the first certificate',
      );
    }
    expect(await refusal(withRootCert(cluster.url('127.0.0.1', 'sslmode=verify-ca'), cluster.otherCaFile))).toBe(
      'unable to verify the first certificate',
    );
  });

  it('a host the certificate does not name is refused by verify-full, accepted by verify-ca (the chain only)', async () => {
    expect(await refusal(withRootCert(cluster.url('127.0.0.2', 'sslmode=verify-full'), cluster.caFile))).toBe(
      "Hostname/IP does not match certificate's altnames: IP: 127.0.0.2 is not in the cert's list: 127.0.0.1",
    );
    expect(await sessionTls(withRootCert(cluster.url('127.0.0.2', 'sslmode=verify-ca'), cluster.caFile))).toEqual(
      overTls,
    );
  });

  it('require encrypts without checking; disable is plain text, which this server refuses', async () => {
    expect(await sessionTls(cluster.url('127.0.0.2', 'sslmode=require'))).toEqual(overTls);
    expect(await refusal(cluster.url('127.0.0.1', 'sslmode=disable'))).toBe(
      'pg_hba.conf rejects connection for host "127.0.0.1", user "postgres", database "postgres", no encryption',
    );
  });

  it('the URL its own sslrootcert wins over DATABASE_SSL_ROOT_CERT, as with libpq', async () => {
    const url = cluster.url('127.0.0.1', `sslmode=verify-full&sslrootcert=${cluster.caFile}`);
    expect(await sessionTls(withRootCert(url, cluster.otherCaFile))).toEqual(overTls);
  });

  it('an unknown sslmode or an unreadable CA file stops before connecting, naming the parameter only', async () => {
    expect(() => createDataSource({ url: cluster.url('127.0.0.1', 'sslmode=sometimes'), poolSize: 1 })).toThrow(
      'sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full',
    );
    expect(() =>
      createDataSource({ url: withRootCert(cluster.url('127.0.0.1'), '/nonexistent/ca.pem'), poolSize: 1 }),
    ).toThrow('sslrootcert: cannot read /nonexistent/ca.pem (ENOENT)');
    const plain = new pg.Client({ connectionString: cluster.url('127.0.0.1', 'sslmode=disable') });
    await expect(plain.connect()).rejects.toMatchObject({ code: '28000' });
  });
});
