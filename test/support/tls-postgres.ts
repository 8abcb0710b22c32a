import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFile, chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../src/database/embedded-postgres.js';

const run = promisify(execFile);
const BIN = '/usr/lib/postgresql/15/bin';

/** A PostgreSQL cluster of the test's own that takes TLS connections only, with a certificate from a CA the test made. */
export interface TlsCluster {
  port: number;
  /** The CA that signed the server's certificate (for localhost and 127.0.0.1 only). */
  caFile: string;
  /** A CA that signed nothing the server has. */
  otherCaFile: string;
  password: string;
  /** A URL as the postgres user on `host` to `database`, with `query` appended. */
  url(host: string, query?: string, database?: string): string;
  stop(): Promise<void>;
}

const asRoot = userInfo().uid === 0;

/** Runs a PostgreSQL program as the postgres OS user when the test runs as root (PostgreSQL refuses root). */
function postgresProgram(program: string, args: string[]) {
  const file = path.join(BIN, program);
  return asRoot ? run('runuser', ['-u', 'postgres', '--', file, ...args]) : run(file, args);
}

async function makeCa(dir: string, name: string): Promise<{ cert: string; key: string }> {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  await run('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', key, '-out', cert, '-days', '2', '-subj', `/CN=menu-sync test ${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
  ]); // prettier-ignore
  return { cert, key };
}

export async function startTlsCluster(): Promise<TlsCluster> {
  const dir = await mkdtemp(path.join(tmpdir(), 'menu-sync-tls-'));
  await chmod(dir, 0o755);
  const password = `tls-${randomBytes(12).toString('hex')}`;
  const ca = await makeCa(dir, 'ca');
  const other = await makeCa(dir, 'other-ca');
  const serverKey = path.join(dir, 'server.key');
  const serverCsr = path.join(dir, 'server.csr');
  const serverCert = path.join(dir, 'server.crt');
  const extensions = path.join(dir, 'server.ext');
  await writeFile(
    extensions,
    'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n',
  );
  await run('openssl', [
    'req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', serverKey, '-out', serverCsr, '-subj', '/CN=localhost',
  ]); // prettier-ignore
  await run('openssl', [
    'x509', '-req', '-in', serverCsr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial',
    '-out', serverCert, '-days', '2', '-extfile', extensions,
  ]); // prettier-ignore
  const data = path.join(dir, 'data');
  const passwordFile = path.join(dir, 'password');
  await writeFile(passwordFile, `${password}\n`);
  if (asRoot) await run('chown', ['-R', 'postgres:postgres', dir]);
  await chmod(serverKey, 0o600);
  await postgresProgram('initdb', [
    '-D', data, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${passwordFile}`, '-E', 'UTF8', '--locale=C',
  ]); // prettier-ignore
  const port = await freePort();
  await appendFile(
    path.join(data, 'postgresql.conf'),
    [
      `port = ${port}`,
      `listen_addresses = '127.0.0.1,127.0.0.2'`,
      `unix_socket_directories = '${dir}'`,
      'ssl = on',
      `ssl_cert_file = '${serverCert}'`,
      `ssl_key_file = '${serverKey}'`,
      'fsync = off',
      'max_connections = 40',
      'shared_buffers = 16MB',
      '',
    ].join('\n'),
  );
  // TLS or nothing: a connection in plain text is refused by the server itself.
  await writeFile(
    path.join(data, 'pg_hba.conf'),
    'local all all scram-sha-256\nhostssl all all 127.0.0.0/8 scram-sha-256\nhostnossl all all 127.0.0.0/8 reject\n',
  );
  const log = path.join(dir, 'postgres.log');
  await postgresProgram('pg_ctl', ['-D', data, '-l', log, '-w', '-t', '60', 'start']);
  return {
    port,
    caFile: ca.cert,
    otherCaFile: other.cert,
    password,
    url: (host, query = '', database = 'postgres') =>
      `postgres://postgres:${password}@${host}:${port}/${database}${query === '' ? '' : `?${query}`}`,
    stop: async () => {
      await postgresProgram('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
