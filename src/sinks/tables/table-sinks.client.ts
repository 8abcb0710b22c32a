import { BeforeApplicationShutdown, Injectable, Logger } from '@nestjs/common';
import type { ChangeEntry } from '../../changes/change.js';
import { encodeChangeCursor } from '../../changes/change-cursor.js';
import { MetricsService } from '../../observability/metrics.service.js';
import type { DeliveryOutcome } from '../delivery.js';
import { EGRESS_REFUSED, EgressGuard } from '../egress/egress-guard.js';
import type { Sink } from '../sink.js';
import { inSnapshot } from '../sink-start.js';
import { committedAnswer, DatabaseFailure, describeDatabaseError, TargetCursor } from './table-batch.js';
import type { TableClient } from './table-client.js';
import { MysqlTableClient } from './mysql-table.client.js';
import { PostgresTableClient } from './postgres-table.client.js';
import { RelationalIdError } from './relational-rows.js';
import { describeRefills, Refill } from './table-refill.js';
import { TableRefillRepository } from './table-refill.repository.js';
import { DEFAULT_SCHEMA, DEFAULT_TABLE_PREFIX, parseTableUrl, TableTarget } from './table-target.js';

/** A table sink's delivery outcome: `committed` with what it applied, or the database's error code. */
export type TableOutcome = DeliveryOutcome & { status?: string | number };

interface OpenClient {
  key: string;
  target: TableTarget;
  client: Promise<TableClient>;
}

/** A table sink's target before a client exists: a sink whose URL cannot be opened, or names no database. */
class TargetUnusable extends Error {}

/**
 * The table sinks' connections (docs/reference.md §12): one client (a pool of two connections) per
 * sink, made when it first delivers, replaced when its URL or schema changes, discarded after every
 * failure (so the next attempt looks at the tables again), closed when the sink stops (removed,
 * disabled) and at shutdown. Every connection of a pool resolves the host again and goes through
 * the egress guard, so a pool that outlives a DNS change never reaches a refused address.
 */
@Injectable()
export class TableSinksClient implements BeforeApplicationShutdown {
  private readonly logger = new Logger(TableSinksClient.name);
  private readonly clients = new Map<string, OpenClient>();
  private closed = false;

  constructor(
    private readonly guard: EgressGuard,
    private readonly metrics: MetricsService,
    private readonly live: TableRefillRepository,
  ) {}

  /** Writes a batch and the sink's cursor in one transaction of the target. */
  async apply(sink: Sink, types: readonly string[], entries: ChangeEntry[]): Promise<TableOutcome> {
    return this.using(sink, async (client) => {
      const result = await client.apply({
        sinkId: sink.id,
        epoch: sink.epoch,
        types,
        expected: sink.cursor,
        entries,
        ownerIds: sink.ownerIds,
        snapshotTo: inSnapshot(sink) ? sink.snapshotTo : null,
        live: this.live,
      });
      if (result.kind === 'applied') return this.committed(sink, committedAnswer(result.rows), result.refills);
      if (result.kind === 'already') return this.committed(sink, committedAnswer(null), result.refills);
      await this.discard(sink.id);
      return {
        kind: 'retry',
        status: 0,
        error: `the target's cursor (${encodeChangeCursor(result.target)}) is behind the sink's: resuming from the target's`,
      };
    });
  }

  /** A committed batch's outcome, and what was re-filled with it (logged: a table changed by hand). */
  private committed(
    sink: Sink,
    answer: ReturnType<typeof committedAnswer>,
    refills: readonly Refill[] = [],
  ): TableOutcome {
    if (refills.length === 0) return { kind: 'ok', ...answer };
    const refilled = describeRefills(refills);
    this.logger.warn({
      msg: 'a table sink re-added missing columns or tables and re-filled them',
      sink: sink.id,
      refilled,
    });
    return { kind: 'ok', ...answer, response: `${answer.response}; ${refilled}` };
  }

  /** The target's cursor of the sink, or the failure reading it. */
  async targetCursor(sink: Sink): Promise<{ cursor: TargetCursor | null } | { failure: TableOutcome }> {
    let cursor: TargetCursor | null = null;
    const outcome = await this.using(sink, async (client) => {
      cursor = await client.targetCursor(sink.id);
      return { kind: 'ok' };
    });
    return outcome.kind === 'ok' ? { cursor } : { failure: outcome };
  }

  /** Closes the sink's pool (it stopped: removed, disabled, or this daemon no longer dispatches). */
  async release(sinkId: string): Promise<void> {
    await this.discard(sinkId);
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.clients.keys()].map((id) => this.discard(id)));
  }

  private async using(sink: Sink, work: (client: TableClient) => Promise<TableOutcome>): Promise<TableOutcome> {
    let open: OpenClient;
    try {
      open = this.open(sink);
    } catch (error) {
      return { kind: 'retry', status: 0, error: (error as Error).message };
    }
    try {
      return await work(await open.client);
    } catch (error) {
      await this.discard(sink.id);
      // mysql2's promise API hands back a copy of the error: its code tells a refusal, not its class.
      if ((error as { code?: unknown })?.code === EGRESS_REFUSED) {
        this.metrics.sinks.egressRefused(sink);
        return { kind: 'retry', status: 0, error: (error as Error).message };
      }
      if (error instanceof TargetUnusable || error instanceof RelationalIdError)
        return { kind: 'retry', status: 0, error: error.message };
      const failure: DatabaseFailure = describeDatabaseError(
        sink.kind === 'mysql' ? 'MySQL' : 'PostgreSQL',
        error,
        open.target.password,
      );
      return { kind: 'retry', ...failure };
    }
  }

  private open(sink: Sink): OpenClient {
    if (this.closed) throw new TargetUnusable('shutting down');
    if (sink.targetUrl === null)
      throw new TargetUnusable('the sink URL cannot be opened with the current TOKEN_ENCRYPTION_KEY; PATCH its url');
    const key = JSON.stringify([sink.kind, sink.targetUrl, sink.schema, sink.tablePrefix, sink.timeoutMs, sink.layout]);
    const known = this.clients.get(sink.id);
    if (known !== undefined && known.key === key) return known;
    if (known !== undefined) void this.discard(sink.id);
    const target = parseTableUrl(sink.kind === 'mysql' ? 'mysql' : 'postgres', sink.targetUrl);
    if (typeof target === 'string') throw new TargetUnusable(target);
    const client = this.connect(sink, target);
    const open = { key, target, client };
    this.clients.set(sink.id, open);
    return open;
  }

  private async connect(sink: Sink, target: TableTarget): Promise<TableClient> {
    const resolve = () => this.guard.resolveAllowed(target.host, target.port);
    if (sink.kind === 'mysql') {
      return new MysqlTableClient({
        target,
        resolve,
        tablePrefix: sink.tablePrefix ?? DEFAULT_TABLE_PREFIX,
        timeoutMs: sink.timeoutMs,
        layout: sink.layout ?? 'document',
      });
    }
    return new PostgresTableClient({
      target,
      resolve,
      schema: sink.schema ?? DEFAULT_SCHEMA,
      timeoutMs: sink.timeoutMs,
      layout: sink.layout ?? 'document',
    });
  }

  private async discard(sinkId: string): Promise<void> {
    const open = this.clients.get(sinkId);
    if (open === undefined) return;
    this.clients.delete(sinkId);
    try {
      await (await open.client).close();
    } catch (error) {
      this.logger.debug({
        msg: 'closing a table sink pool failed',
        sink: sinkId,
        code: (error as { code?: string })?.code,
      });
    }
  }
}
