import pg from 'pg';
import { useDatabase } from '../../../test/support/database.js';
import { product } from '../../../test/support/menu-events.js';
import { ChangeFactory, tableSink, tableSinksClient } from '../../../test/support/table-sinks.js';
import { startTlsCluster, TlsCluster } from '../../../test/support/tls-postgres.js';

/**
 * docs/reference.md §13, TLS: a postgres table sink's URL takes sslmode and sslrootcert, read as
 * libpq reads them; the target is a cluster of the test's own that takes TLS only. A refused
 * certificate is the attempt's error (status 0 is not what it gets: the TLS error's code), and
 * never carries the password.
 */
describe('TLS to a PostgreSQL table sink target', () => {
  let cluster: TlsCluster;
  const daemon = useDatabase(2);
  const { client } = tableSinksClient(daemon);
  const changes = new ChangeFactory();

  beforeAll(async () => {
    cluster = await startTlsCluster();
  }, 120_000);

  afterAll(async () => {
    await client.beforeApplicationShutdown();
    await cluster?.stop();
  });

  const deliver = (query: string, host = '127.0.0.1') =>
    client.apply(
      tableSink('postgres', cluster.url(host, query), { types: ['product'] }),
      ['product'],
      [changes.upsert('o', product('1'))],
    );

  it('verify-full with the CA of the certificate writes the batch, over TLS', async () => {
    expect(await deliver(`sslmode=verify-full&sslrootcert=${cluster.caFile}`)).toMatchObject({ kind: 'ok' });
    expect(await deliver(`sslrootcert=${cluster.caFile}`)).toMatchObject({ kind: 'ok' });
    const check = new pg.Client({
      connectionString: cluster.url('127.0.0.1', `sslmode=verify-full&sslrootcert=${cluster.caFile}`),
    });
    await check.connect();
    try {
      const { rows } = await check.query(`SELECT owner_id, id FROM menu_sync.products`);
      expect(rows).toEqual([{ owner_id: 'o', id: '1' }]);
    } finally {
      await check.end();
    }
  });

  it('another CA, or a host the certificate does not name, is the attempt error; the password never shows', async () => {
    const refusals = [
      await deliver(`sslmode=verify-full&sslrootcert=${cluster.otherCaFile}`),
      await deliver(`sslmode=verify-full&sslrootcert=${cluster.caFile}`, '127.0.0.2'),
      await deliver(`sslmode=verify-ca&sslrootcert=${cluster.otherCaFile}`),
      await deliver('sslmode=disable'),
    ];
    expect(refusals).toEqual([
      {
        kind: 'retry',
        status: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
        error: 'PostgreSQL error UNABLE_TO_VERIFY_LEAF_SIGNATURE: unable to verify the first certificate',
      },
      {
        kind: 'retry',
        status: 'ERR_TLS_CERT_ALTNAME_INVALID',
        error:
          "PostgreSQL error ERR_TLS_CERT_ALTNAME_INVALID: Hostname/IP does not match certificate's altnames: IP: 127.0.0.2 is not in the cert's list: 127.0.0.1",
      },
      {
        kind: 'retry',
        status: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
        error: 'PostgreSQL error UNABLE_TO_VERIFY_LEAF_SIGNATURE: unable to verify the first certificate',
      },
      {
        kind: 'retry',
        status: '28000',
        error:
          'PostgreSQL error 28000: pg_hba.conf rejects connection for host "127.0.0.1", user "postgres", database "postgres", no encryption',
      },
    ]);
    expect(JSON.stringify(refusals)).not.toContain(cluster.password);
  });

  it('verify-ca checks the chain only: a host the certificate does not name is accepted', async () => {
    expect(await deliver(`sslmode=verify-ca&sslrootcert=${cluster.caFile}`, '127.0.0.2')).toMatchObject({ kind: 'ok' });
  });
});
