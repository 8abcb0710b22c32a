import { setTimeout as sleep } from 'node:timers/promises';
import { Command, CommandRunner, Option } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { EventLogRepository } from '../event-log/event-log.repository.js';
import { PROJECTIONS } from '../projection/projection-definitions.js';
import { ProjectionStatusRepository } from '../projection/projection-status.repository.js';
import { ReconcileRepository } from '../reconcile/reconcile.repository.js';
import { needsAttention, StatusSnapshot } from '../observability/status-report.js';
import { StatusRepository } from '../observability/status.repository.js';
import { withDaemonDataSource } from './daemon-database.js';
import { formatStatus } from './status-screen.js';
import { integerOption } from './option-parsers.js';

interface StatusOptions {
  json?: boolean;
  lagThreshold?: number;
  intervalMs?: number;
}

/** Exit 0 when all is well, 1 when something needs attention (or the database cannot be read), 2 on bad usage. */
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
    let snapshot: StatusSnapshot;
    try {
      snapshot = await this.snapshot(options.intervalMs ?? 1000);
    } catch (error) {
      process.stderr.write(`menu-sync status: cannot read the daemon's database: ${(error as Error).message}\n`);
      process.exitCode = 1;
      return;
    }
    const attention = needsAttention(snapshot, { lagEvents: options.lagThreshold ?? 10_000 });
    process.stdout.write(
      options.json
        ? `${JSON.stringify(toJson(snapshot, attention), null, 2)}\n`
        : formatStatus(snapshot, attention, process.stdout.isTTY === true),
    );
    if (attention.length > 0) process.exitCode = 1;
  }

  private async snapshot(intervalMs: number): Promise<StatusSnapshot> {
    // A look only: status never changes the database, not even to migrate it.
    return withDaemonDataSource(
      this.config,
      2,
      async (dataSource) => {
        const projections = new ProjectionStatusRepository(dataSource);
        const log = new EventLogRepository(dataSource);
        const status = new StatusRepository(dataSource);
        const sample = () =>
          Promise.all(
            PROJECTIONS.map(async (projection) => {
              const state = await projections.status(projection);
              return {
                name: projection.name,
                position: Number(state.checkpoint.position),
                lag: await projections.lag(state.checkpoint),
                parked: state.parked,
                lastError: state.lastError,
              };
            }),
          );
        const head = await log.headPosition();
        const first = await sample();
        const [connections, sinks, [run], quarantined] = await Promise.all([
          status.connections(),
          status.sinks(),
          new ReconcileRepository(dataSource).listRuns(1),
          status.quarantined(),
        ]);
        await sleep(intervalMs);
        const later = await sample();
        return {
          at: new Date(),
          connections,
          projections: first.map((item) => ({ ...item, head })),
          later: later.map(({ name, position, lag }) => ({ name, position, lag })),
          sinks,
          lastReconcile: run && {
            id: run.id,
            trigger: run.trigger,
            outcome: run.outcome,
            startedAt: run.started_at,
            errors: run.errors,
          },
          quarantined,
        };
      },
      { migrate: false },
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

  @Option({ flags: '--interval-ms <ms>', description: 'time between the two lag samples (default 1000)' })
  parseInterval(value: string): number {
    return integerOption(value, '--interval-ms', 0, 99_999);
  }
}

function toJson(snapshot: StatusSnapshot, attention: string[]) {
  return {
    ok: attention.length === 0,
    attention,
    at: snapshot.at.toISOString(),
    connections: snapshot.connections.map((connection) => ({
      id: connection.id,
      state: connection.state,
      owner_id: connection.ownerId,
      sandbox: connection.sandbox,
      token_expires_at: connection.expiresAt.toISOString(),
      last_error: connection.lastError,
      subscriptions: connection.subscriptions,
      failed_subscriptions: connection.failedSubscriptions,
    })),
    projections: snapshot.projections.map((projection) => {
      const later = snapshot.later.find((item) => item.name === projection.name);
      return {
        name: projection.name,
        position: later?.position ?? projection.position,
        head: projection.head,
        lag: later?.lag ?? projection.lag,
        lag_before: projection.lag,
        parked: projection.parked,
        last_error: projection.lastError,
      };
    }),
    sinks:
      snapshot.sinks?.map((sink) => ({
        id: sink.id,
        kind: sink.kind,
        state: sink.state,
        last_error: sink.lastError,
      })) ?? null,
    last_reconcile: snapshot.lastReconcile
      ? {
          id: snapshot.lastReconcile.id,
          trigger: snapshot.lastReconcile.trigger,
          outcome: snapshot.lastReconcile.outcome,
          started_at: snapshot.lastReconcile.startedAt,
          errors: snapshot.lastReconcile.errors,
        }
      : null,
    quarantined: snapshot.quarantined,
  };
}
