import { Command, CommandRunner, Option } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import type { StatusReport } from '../observability/status-report.js';
import { integerOption } from './option-parsers.js';

interface StatusOptions {
  json?: boolean;
  lagThreshold?: number;
  intervalMs?: number;
}

/**
 * Exit 0 when all is well, 1 when something needs attention (or the daemon's database cannot be
 * read), 2 on bad usage. With MENU_SYNC_URL the daemon answers (GET /api/v1/status); else the
 * database is read here, by the same code.
 */
@Command({
  name: 'status',
  description:
    'One screen: connections, projections, sinks, last reconcile, quarantine; exit 1 when something needs attention',
})
export class StatusCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], options: StatusOptions): Promise<void> {
    let report: StatusReport;
    try {
      report = await this.report(options);
    } catch (error) {
      const where = this.config.MENU_SYNC_URL === undefined ? "the daemon's database" : this.config.MENU_SYNC_URL;
      // 42P01: a database no daemon has migrated yet (status never migrates).
      const hint =
        (error as { code?: string }).code === '42P01' ? ' (run `menu-sync migrate`, or start the daemon)' : '';
      process.stderr.write(`menu-sync status: cannot read ${where}: ${(error as Error).message}${hint}\n`);
      process.exitCode = 1;
      return;
    }
    const { formatStatus } = await import('./status-screen.js');
    process.stdout.write(
      options.json ? `${JSON.stringify(report, null, 2)}\n` : formatStatus(report, process.stdout.isTTY === true),
    );
    if (!report.ok) process.exitCode = 1;
  }

  private async report(options: StatusOptions): Promise<StatusReport> {
    if (this.config.MENU_SYNC_URL !== undefined) {
      const { DaemonApi } = await import('./daemon-api.js');
      const query = options.lagThreshold === undefined ? '' : `?lag_threshold=${options.lagThreshold}`;
      return (await DaemonApi.fromConfig(this.config).get(`/api/v1/status${query}`)) as StatusReport;
    }
    const [{ onDaemonSql }, { readStatus }, { StatusRepository }, { PROJECTIONS }] = await Promise.all([
      import('./daemon-sql.js'),
      import('../observability/status-reader.js'),
      import('../observability/status.repository.js'),
      import('../projection/projection-definitions.js'),
    ]);
    // A look only: status never changes the database, not even to migrate it.
    return onDaemonSql(this.config, (sql) =>
      readStatus(new StatusRepository(sql, PROJECTIONS), {
        lagThreshold: options.lagThreshold,
        intervalMs: options.intervalMs,
        sinkAttentionAfterMs: this.config.sinkAttentionAfterMs,
        webhookKeys: this.config.WEBHOOK_KEYS.length > 0,
      }),
    );
  }

  @Option({ flags: '--json', description: 'print the status as JSON (for scripts)' })
  parseJson(): boolean {
    return true;
  }

  @Option({
    flags: '--lag-threshold <events>',
    description: 'projector lag that needs attention whatever its trend (default 10000)',
  })
  parseLagThreshold(value: string): number {
    return integerOption(value, '--lag-threshold', 1, 9_999_999_999);
  }

  @Option({
    flags: '--interval-ms <ms>',
    description: 'read the projections again after this long, to see a lag grow (default 0: once)',
  })
  parseInterval(value: string): number {
    return integerOption(value, '--interval-ms', 0, 99_999);
  }
}
