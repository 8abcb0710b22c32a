import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** A sink as its workers report it: `kind` is http, nats, postgres or mysql. */
export interface SinkRef {
  id: string;
  kind: string;
}

export type SinkOutcome = 'ok' | 'retry' | 'disabled';

/** The states a sink is counted in, by kind (`menu_sync_sinks{kind,state}`). */
export interface SinkCount {
  kind: string;
  state: string;
  n: number;
}

/** What is kept of a sink this process delivers or delivered: a few numbers, whatever its traffic. */
interface SinkEntry {
  kind: string | undefined;
  /** Changes not yet acknowledged, as last counted; null while not delivered here. */
  lag: number | null;
  delivering: boolean;
  /** Failed deliveries since the last success. */
  failures: number;
  ok: number;
  retry: number;
  disabled: number;
  refused: number;
}

const KINDS = ['http', 'nats', 'postgres', 'mysql'];
const STATES = ['active', 'retrying', 'disabled', 'failing'];
const OUTCOMES: SinkOutcome[] = ['ok', 'retry', 'disabled'];
const QUANTILES = [0.5, 0.99, 1];
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60];
/** How long a choice of the sinks with series of their own stands while there are more sinks than series. */
const SELECT_EVERY_MS = 1000;

/** Failing sinks this process delivers first, then the most lagging, then the most failures; by id at last. */
function moreInteresting([aId, a]: [string, SinkEntry], [bId, b]: [string, SinkEntry]): number {
  const failing = (entry: SinkEntry) => (entry.delivering && entry.failures > 0 ? 1 : 0);
  return failing(b) - failing(a) || (b.lag ?? -1) - (a.lag ?? -1) || b.failures - a.failures || (aId < bId ? -1 : 1);
}

/** The nearest-rank quantile of ascending values (q = 1: the largest). */
const quantile = (sorted: number[], q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)];

/**
 * The sink metrics (docs/reference.md §11): aggregates by `kind` (and `outcome`, `state`) for every
 * sink, and series labelled by `sink` only for `size` of them, the most lagging or failing, chosen
 * again at a scrape at most every second. Memory is a few numbers per sink, series O(kinds + size).
 * `menu_sync_sink_delivery_seconds{sink}` counts a sink's attempts since it was last chosen.
 */
export class SinkSeries {
  private readonly entries = new Map<string, SinkEntry>();
  private selected = new Set<string>();
  private selectedAt = -Infinity;
  /** The sinks with a `menu_sync_sink_delivery_seconds{sink}` series. */
  private readonly timed = new Set<string>();

  private readonly deliveries: Counter<'kind' | 'outcome'>;
  private readonly seconds: Histogram<'kind'>;
  private readonly refused: Counter<'kind'>;
  private readonly counts: Gauge<'kind' | 'state'>;
  private readonly failing: Gauge;
  private readonly sinkSeconds: Histogram<'sink'>;

  constructor(
    registry: Registry,
    private readonly size: number,
    private readonly now: () => number = Date.now,
  ) {
    const registers = [registry];
    this.deliveries = new Counter({
      name: 'menu_sync_sinks_deliveries_total',
      help: 'Sink deliveries (a batch, or one JetStream publish round) by kind and outcome: ok, retry, disabled',
      labelNames: ['kind', 'outcome'],
      registers,
    });
    this.seconds = new Histogram({
      name: 'menu_sync_sinks_delivery_seconds',
      help: 'Time of one delivery attempt, until the target acknowledged or failed, by kind of sink',
      labelNames: ['kind'],
      buckets: BUCKETS,
      registers,
    });
    this.refused = new Counter({
      name: 'menu_sync_sinks_egress_refused_total',
      help: 'Connections of sinks the egress guard refused, by kind of sink',
      labelNames: ['kind'],
      registers,
    });
    this.counts = new Gauge({
      name: 'menu_sync_sinks',
      help: 'Sinks in the database by kind and state, as this process last counted (a sink dispatcher)',
      labelNames: ['kind', 'state'],
      registers,
    });
    this.failing = new Gauge({
      name: 'menu_sync_sinks_failing',
      help: 'Sinks failing for longer than SINK_FAILING_AFTER',
      registers,
    });
    this.sinkSeconds = new Histogram({
      name: 'menu_sync_sink_delivery_seconds',
      help: 'Time of one delivery attempt of a sink (the METRICS_SINK_SERIES most lagging or failing), since it was chosen',
      labelNames: ['sink'],
      buckets: BUCKETS,
      registers,
      // A sink no longer chosen loses its series at the scrape that finds it so.
      collect: () => void this.select(),
    });
    this.registerAggregateLag(registers);
    this.registerPerSink(registers);
  }

  observeSeconds(sink: SinkRef, seconds: number): void {
    this.entry(sink.id, sink.kind);
    this.seconds.observe({ kind: sink.kind }, seconds);
    if (this.entries.size > this.size && !this.selected.has(sink.id)) return;
    this.sinkSeconds.observe({ sink: sink.id }, seconds);
    this.timed.add(sink.id);
  }

  delivered(sink: SinkRef, outcome: SinkOutcome): void {
    const entry = this.entry(sink.id, sink.kind);
    entry[outcome]++;
    entry.failures = outcome === 'ok' ? 0 : entry.failures + 1;
    this.deliveries.inc({ kind: sink.kind, outcome });
  }

  lag(sink: SinkRef, changes: number): void {
    this.entry(sink.id, sink.kind).lag = changes;
  }

  egressRefused(sink: SinkRef): void {
    this.entry(sink.id, sink.kind).refused++;
    this.refused.inc({ kind: sink.kind });
  }

  /** The sinks this process delivers now (it holds their leases). */
  leased(ids: Iterable<string>): void {
    const delivering = new Set(ids);
    for (const [id, entry] of this.entries) entry.delivering = delivering.delete(id);
    for (const id of delivering) this.entry(id).delivering = true;
  }

  /** `leased` for one sink: this process delivers it (or not) now. */
  delivering(id: string, on: boolean): void {
    if (on) this.entry(id).delivering = true;
    else this.forget(id);
  }

  /** The sink is no longer delivered here: its lag is unknown; what it delivered is still counted. */
  forget(id: string): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    entry.lag = null;
    entry.delivering = false;
  }

  /** This process delivers no sink any more (its dispatcher's connection ended). */
  clear(): void {
    for (const id of this.entries.keys()) this.forget(id);
  }

  /** The sinks of the database by kind and state (every combination shown, 0 if none). */
  count(counts: readonly SinkCount[]): void {
    this.counts.reset();
    for (const kind of KINDS) for (const state of STATES) this.counts.set({ kind, state }, 0);
    for (const { kind, state, n } of counts) this.counts.set({ kind, state }, n);
    this.failing.set(counts.filter(({ state }) => state === 'failing').reduce((sum, { n }) => sum + n, 0));
  }

  /** A sink leased is known before its worker reported its kind. */
  private entry(id: string, kind?: string): SinkEntry {
    let entry = this.entries.get(id);
    if (entry === undefined) {
      entry = { kind: undefined, lag: null, delivering: false, failures: 0, ok: 0, retry: 0, disabled: 0, refused: 0 };
      this.entries.set(id, entry);
    }
    if (kind !== undefined) entry.kind = kind;
    return entry;
  }

  /** At a scrape: the ids of the sinks with series of their own, every sink while there are at most `size`. */
  private select(): Set<string> {
    if (this.entries.size <= this.size) {
      if (this.selected.size !== this.entries.size) this.selected = new Set(this.entries.keys());
      return this.selected;
    }
    if (this.now() - this.selectedAt < SELECT_EVERY_MS) return this.selected;
    const ranked = [...this.entries].sort(moreInteresting).slice(0, this.size);
    this.selected = new Set(ranked.map(([id]) => id));
    this.selectedAt = this.now();
    for (const id of this.timed) {
      if (this.selected.has(id)) continue;
      this.sinkSeconds.remove({ sink: id });
      this.timed.delete(id);
    }
    return this.selected;
  }

  private chosen(): Array<[string, SinkEntry]> {
    return [...this.select()].map((id) => [id, this.entries.get(id)!]);
  }

  /** Lag quantiles and backlog by kind, over the sinks this process delivers, computed at the scrape. */
  private registerAggregateLag(registers: Registry[]): void {
    const lagsByKind = () => {
      const lags = new Map<string, number[]>();
      for (const { kind, lag, delivering } of this.entries.values()) {
        if (kind === undefined || lag === null || !delivering) continue;
        const ofKind = lags.get(kind);
        if (ofKind === undefined) lags.set(kind, [lag]);
        else ofKind.push(lag);
      }
      return lags;
    };
    new Gauge({
      name: 'menu_sync_sinks_lag_changes',
      help: 'Lag of the sinks this process delivers, by kind: quantile 0.5, 0.99 and 1 (the largest)',
      labelNames: ['kind', 'quantile'],
      registers,
      collect() {
        this.reset();
        for (const [kind, lags] of lagsByKind()) {
          lags.sort((a, b) => a - b);
          for (const q of QUANTILES) this.set({ kind, quantile: String(q) }, quantile(lags, q));
        }
      },
    });
    new Gauge({
      name: 'menu_sync_sinks_backlog_changes',
      help: 'Changes the sinks this process delivers have yet to deliver (their lags summed), by kind',
      labelNames: ['kind'],
      registers,
      collect() {
        this.reset();
        for (const [kind, lags] of lagsByKind())
          this.set(
            { kind },
            lags.reduce((sum, lag) => sum + lag, 0),
          );
      },
    });
    const entries = this.entries;
    new Gauge({
      name: 'menu_sync_sinks_leased',
      help: 'Sinks this process delivers (it holds their leases)',
      registers,
      collect() {
        this.set([...entries.values()].filter((entry) => entry.delivering).length);
      },
    });
  }

  /** The contract's series labelled by sink (§11, §12), for the chosen sinks only, read at the scrape. */
  private registerPerSink(registers: Registry[]): void {
    const chosen = () => this.chosen();
    new Gauge({
      name: 'menu_sync_sink_lag_changes',
      help: 'Changes a sink follows that its target has not acknowledged yet (the METRICS_SINK_SERIES most lagging or failing)',
      labelNames: ['sink'],
      registers,
      collect() {
        this.reset();
        for (const [sink, entry] of chosen()) if (entry.lag !== null) this.set({ sink }, entry.lag);
      },
    });
    new Counter({
      name: 'menu_sync_sink_deliveries_total',
      help: 'Sink deliveries by outcome: ok, retry, disabled (the METRICS_SINK_SERIES most lagging or failing)',
      labelNames: ['sink', 'outcome'],
      registers,
      collect() {
        this.reset();
        for (const [sink, entry] of chosen())
          for (const outcome of OUTCOMES) this.inc({ sink, outcome }, entry[outcome]);
      },
    });
    new Counter({
      name: 'menu_sync_sink_egress_refused_total',
      help: 'Connections of a sink the egress guard refused (an address outside public unicast and SINK_ALLOWED_NETWORKS)',
      labelNames: ['sink'],
      registers,
      collect() {
        this.reset();
        for (const [sink, entry] of chosen()) if (entry.refused > 0) this.inc({ sink }, entry.refused);
      },
    });
    new Gauge({
      name: 'menu_sync_sink_leased',
      help: 'Sinks this process delivers (it holds their lease): 1 per sink, of the METRICS_SINK_SERIES chosen',
      labelNames: ['sink'],
      registers,
      collect() {
        this.reset();
        for (const [sink, entry] of chosen()) if (entry.delivering) this.set({ sink }, 1);
      },
    });
  }
}
