import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import type { AuditActor } from '../../audit/audit-actor.js';
import { AuditLog } from '../../audit/audit-log.service.js';
import { BadRequestError } from '../../common/app-error.js';
import { AppConfig } from '../../config/app-config.js';
import {
  DEFAULT_BATCH_SIZE,
  DEFAULT_STREAM,
  DEFAULT_SUBJECT_PREFIX,
  DEFAULT_TIMEOUT_MS,
  LagCount,
  SECRET_OVERLAP_MS,
  Sink,
  SINK_KINDS,
  SINK_STATES,
  SinkKind,
  SinkState,
} from '../sink.js';
import { EgressGuard } from '../egress/egress-guard.js';
import { SINKS_CHANGED } from '../dispatch/sink-dispatcher.service.js';
import { generateSinkSecret } from '../http/sink-secret.js';
import { SinkListing } from '../sink-listing.repository.js';
import { NewSink, SinkRepository } from '../sink.repository.js';
import { decodeSinkPageKey, encodeSinkPageKey, SINK_ORDERS, SinkPageQuery } from '../sink-page.js';
import { parseSinkFrom } from '../sink-start.js';
import {
  DEFAULT_SCHEMA,
  DEFAULT_TABLE_PREFIX,
  isTableKind,
  maskTableUrl,
  parseTableUrl,
  TableSinkKind,
} from '../tables/table-target.js';
import { RELATIONAL_PREFIX_MAX } from '../tables/relational-tables.js';
import { toSinkView, SinkView } from './sink-view.js';
import { CreateSinkDto, ListSinksQuery, ReplaySinkDto, UpdateSinkDto } from './sinks.dto.js';
import { SinkNotFoundError, SinkUnprocessableError } from '../sinks.errors.js';

/** `lag` of a single sink counts up to this many changes (lists count less: LIST_LAG_WINDOW). */
const VIEW_LAG_CAP = 1_000_000;
/** How many failing and most lagging sinks the summary names. */
const SUMMARY_SHOWN = 5;
/** The summary's most lagging sinks are counted among this many whose cursors are the furthest behind. */
const SUMMARY_CANDIDATES = 20;

export interface SinksSummary {
  total: number;
  by_state: Record<SinkState, number>;
  by_kind: Record<SinkKind, number>;
  failing: Array<{ id: string; state: SinkState; failing_since: string | null }>;
  most_lagging: Array<{ id: string; lag: number; lag_capped: boolean }>;
}

/** Sink management (docs/reference.md §11): the API and the CLI call these. */
@Injectable()
export class SinksService {
  constructor(
    private readonly repository: SinkRepository,
    private readonly listing: SinkListing,
    private readonly config: AppConfig,
    private readonly events: EventEmitter2,
    private readonly egress: EgressGuard,
    private readonly audit: AuditLog,
  ) {}

  /** The new sink, with its secret (http): the only time it is shown, besides a rotation. */
  async create(dto: CreateSinkDto, actor: AuditActor): Promise<{ data: SinkView & { secret?: string } }> {
    checkTableFields(dto);
    if (dto.kind === 'nats') {
      if (dto.url !== undefined) throw new BadRequestError('url is only for http and table sinks', 'url');
      if (this.config.NATS_URL === undefined) {
        throw new SinkUnprocessableError('kind nats needs NATS_URL, which this daemon is not configured with', 'kind');
      }
    } else if (dto.stream !== undefined || dto.subject_prefix !== undefined) {
      throw new BadRequestError(
        `${dto.stream !== undefined ? 'stream' : 'subject_prefix'} is only for nats sinks`,
        dto.stream !== undefined ? 'stream' : 'subject_prefix',
      );
    }
    if (dto.url !== undefined) await this.checkEgress(dto.url);
    const secret = dto.kind === 'http' ? generateSinkSecret() : null;
    const sink = await this.repository.create({
      id: randomUUID(),
      kind: dto.kind,
      url: dto.kind === 'nats' ? null : isTableKind(dto.kind) ? maskTableUrl(dto.url!) : dto.url!,
      ...tableFields(dto),
      stream: dto.kind === 'nats' ? (dto.stream ?? DEFAULT_STREAM) : null,
      subjectPrefix: dto.kind === 'nats' ? (dto.subject_prefix ?? DEFAULT_SUBJECT_PREFIX) : null,
      types: dto.types === undefined ? null : [...new Set(dto.types)],
      ownerIds: dto.owner_ids === undefined ? null : [...new Set(dto.owner_ids)],
      batchSize: dto.batch_size ?? DEFAULT_BATCH_SIZE,
      timeoutMs: dto.timeout_ms ?? DEFAULT_TIMEOUT_MS,
      secret,
      from: parseSinkFrom(dto.from ?? 'snapshot'),
      defaultTypes: this.config.changeTypes,
    });
    this.events.emit(SINKS_CHANGED, sink.id);
    await this.audit.record({ actor, action: 'sink.created', target: sink.id, detail: { kind: sink.kind } });
    return { data: { ...(await this.view(sink)), ...(secret === null ? {} : { secret }) } };
  }

  /**
   * A page of sinks (docs/reference.md §13), read by keyset from the indexes; the lag of the page's
   * sinks only, in one bounded statement (LIST_LAG_WINDOW).
   */
  async list(query: ListSinksQuery): Promise<{ data: SinkView[]; next_cursor: string | null }> {
    const order = query.order ?? SINK_ORDERS[0];
    const rows = await this.listing.page({
      limit: query.limit,
      order,
      after: query.after === undefined ? undefined : decodeSinkPageKey(query.after, order),
      state: query.state,
      kind: query.kind,
      ownerId: query.owner_id,
      q: query.q,
    } satisfies SinkPageQuery);
    const page = rows.slice(0, query.limit);
    const types = this.config.changeTypes;
    const lags = await this.listing.lags(
      page.map(({ sink }) => sink.id),
      types,
    );
    return {
      // A sink deleted between the two statements: no lag to show, so lag 0, as for one that caught up.
      data: page.map(({ sink }) => toSinkView(sink, lags.get(sink.id) ?? { lag: 0, capped: false }, types)),
      next_cursor: rows.length > query.limit ? encodeSinkPageKey(page[page.length - 1].key) : null,
    };
  }

  /** Every sink matching `query`'s filters, a page at a time (the CLI's `sinks list`, the sandbox). */
  async *all(query: Omit<ListSinksQuery, 'after'>): AsyncGenerator<SinkView[]> {
    let after: string | undefined;
    do {
      const page = await this.list({ ...query, after });
      yield page.data;
      after = page.next_cursor ?? undefined;
    } while (after !== undefined);
  }

  /**
   * Counts by state and kind, the failing sinks that have failed longest, and the most lagging
   * among the sinks whose cursors are the furthest behind (a bounded count each), for the console.
   */
  async summary(): Promise<{ data: SinksSummary }> {
    const [counts, failing, behind] = await Promise.all([
      this.listing.counts(),
      this.listing.page({ limit: SUMMARY_SHOWN, order: 'failing' }),
      this.listing.furthestBehind(SUMMARY_CANDIDATES),
    ]);
    const lags = await this.listing.lags(behind, this.config.changeTypes);
    const byState = Object.fromEntries(SINK_STATES.map((state) => [state, 0])) as Record<SinkState, number>;
    for (const { state, n } of counts.byState) byState[state] = n;
    const byKind = Object.fromEntries(SINK_KINDS.map((kind) => [kind, 0])) as Record<SinkKind, number>;
    for (const { kind, n } of counts.byKind) byKind[kind] = n;
    return {
      data: {
        total: counts.byState.reduce((sum, { n }) => sum + n, 0),
        by_state: byState,
        by_kind: byKind,
        failing: failing
          .slice(0, SUMMARY_SHOWN)
          .filter(({ sink }) => sink.state === 'failing' || sink.state === 'retrying')
          .map(({ sink }) => ({
            id: sink.id,
            state: sink.state,
            failing_since: sink.failingSince?.toISOString() ?? null,
          })),
        most_lagging: [...lags]
          .filter(([, { lag }]) => lag > 0)
          .sort(([a, x], [b, y]) => y.lag - x.lag || (a < b ? -1 : 1))
          .slice(0, SUMMARY_SHOWN)
          .map(([id, { lag, capped }]) => ({ id, lag, lag_capped: capped })),
      },
    };
  }

  async get(id: string): Promise<{ data: SinkView }> {
    return { data: await this.view(await this.find(id)) };
  }

  async update(id: string, dto: UpdateSinkDto, actor: AuditActor): Promise<{ data: SinkView }> {
    const sink = await this.find(id);
    if (dto.url !== undefined && sink.kind === 'nats')
      throw new BadRequestError('url is only for http and table sinks', 'url');
    if (dto.url !== undefined && sink.kind === 'http' && !/^https?:/i.test(dto.url))
      throw new BadRequestError('url must be an http(s) URL', 'url');
    const tableUrl = dto.url !== undefined && isTableKind(sink.kind) ? tableUrlFor(sink.kind, dto.url) : undefined;
    if (dto.url !== undefined) await this.checkEgress(dto.url);
    const updated = await this.repository.update(id, {
      url: tableUrl === undefined ? dto.url : maskTableUrl(tableUrl),
      targetUrl: tableUrl,
      types: dto.types === undefined ? undefined : [...new Set(dto.types)],
      ownerIds: dto.owner_ids === undefined ? undefined : [...new Set(dto.owner_ids)],
      batchSize: dto.batch_size,
      timeoutMs: dto.timeout_ms,
      state: dto.state,
    });
    if (updated === null) throw new SinkNotFoundError(id);
    this.events.emit(SINKS_CHANGED, id);
    const fields = Object.keys(dto).filter((field) => dto[field as keyof UpdateSinkDto] !== undefined);
    await this.audit.record({ actor, action: 'sink.updated', target: id, detail: { fields } });
    return { data: await this.view(updated) };
  }

  async remove(id: string, actor: AuditActor): Promise<void> {
    checkId(id);
    if (!(await this.repository.delete(id))) throw new SinkNotFoundError(id);
    this.events.emit(SINKS_CHANGED, id);
    await this.audit.record({ actor, action: 'sink.deleted', target: id });
  }

  /**
   * Delivers again from `from` (docs/reference.md §12: the current state, the start, now, or after
   * a cursor); a cursor older than the log keeps starts over with the current state.
   */
  async replay(id: string, dto: ReplaySinkDto, actor: AuditActor): Promise<{ data: SinkView }> {
    checkId(id);
    const sink = await this.repository.replay(id, parseSinkFrom(dto.from), this.config.changeTypes);
    if (sink === null) throw new SinkNotFoundError(id);
    this.events.emit(SINKS_CHANGED, id);
    await this.audit.record({ actor, action: 'sink.replayed', target: id, detail: { from: dto.from } });
    return { data: await this.view(sink) };
  }

  /** A new secret, shown once; the old one keeps signing beside it for 24 h. */
  async rotateSecret(id: string, actor: AuditActor): Promise<{ data: SinkView & { secret: string } }> {
    const sink = await this.find(id);
    if (sink.kind !== 'http') throw new SinkUnprocessableError('only http sinks have a secret', 'kind');
    const secret = generateSinkSecret();
    const rotated = await this.repository.rotateSecret(id, secret, new Date(Date.now() + SECRET_OVERLAP_MS));
    if (rotated === null) throw new SinkNotFoundError(id);
    this.events.emit(SINKS_CHANGED, id);
    await this.audit.record({ actor, action: 'sink.secret_rotated', target: id });
    return { data: { ...(await this.view(rotated)), secret } };
  }

  /** 422 when the URL's host is, or resolves to, an address the egress guard refuses (docs/reference.md §12). */
  private async checkEgress(url: string): Promise<void> {
    const refused = await this.egress.checkUrl(url);
    if (refused !== undefined) {
      throw new SinkUnprocessableError(
        `url reaches ${refused.address} (${refused.range}), which sinks may not reach unless SINK_ALLOWED_NETWORKS includes it`,
        'url',
      );
    }
  }

  private async find(id: string): Promise<Sink> {
    checkId(id);
    const sink = await this.repository.find(id);
    if (sink === null) throw new SinkNotFoundError(id);
    return sink;
  }

  private async view(sink: Sink): Promise<SinkView> {
    const types = this.config.changeTypes;
    const lag = await this.repository.lag(sink, sink.types ?? types, sink.ownerIds, VIEW_LAG_CAP);
    return toSinkView(sink, { lag, capped: lag >= VIEW_LAG_CAP } satisfies LagCount, types);
  }
}

/** `schema` is for postgres sinks, `table_prefix` for mysql ones, `layout` for both only. */
function checkTableFields(dto: CreateSinkDto): void {
  if (dto.layout !== undefined && !isTableKind(dto.kind))
    throw new BadRequestError('layout is only for postgres and mysql sinks', 'layout');
  if (dto.schema !== undefined && dto.kind !== 'postgres')
    throw new BadRequestError('schema is only for postgres sinks', 'schema');
  if (dto.table_prefix !== undefined && dto.kind !== 'mysql')
    throw new BadRequestError('table_prefix is only for mysql sinks', 'table_prefix');
  if (dto.layout === 'relational' && (dto.table_prefix?.length ?? 0) > RELATIONAL_PREFIX_MAX)
    throw new BadRequestError(
      `table_prefix may have at most ${RELATIONAL_PREFIX_MAX} characters with the relational layout (MySQL names have at most 64)`,
      'table_prefix',
    );
}

function tableFields(dto: CreateSinkDto): Pick<NewSink, 'targetUrl' | 'schema' | 'tablePrefix' | 'layout'> {
  if (!isTableKind(dto.kind)) return {};
  return {
    targetUrl: tableUrlFor(dto.kind, dto.url!),
    schema: dto.kind === 'postgres' ? (dto.schema ?? DEFAULT_SCHEMA) : null,
    tablePrefix: dto.kind === 'mysql' ? (dto.table_prefix ?? DEFAULT_TABLE_PREFIX) : null,
    layout: dto.layout ?? 'document',
  };
}

/** A table sink's URL, checked against its kind (a PATCH cannot turn a postgres sink into a mysql one). */
function tableUrlFor(kind: TableSinkKind, url: string): string {
  const target = parseTableUrl(kind, url);
  if (typeof target === 'string') throw new BadRequestError(target, 'url');
  return url;
}

/** Sink ids are UUIDs; anything else names no sink (and must not reach a uuid column). */
export function checkId(id: string): void {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) throw new SinkNotFoundError(id);
}
