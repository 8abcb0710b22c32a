import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { performance } from 'node:perf_hooks';
import { Clock } from '../clock.js';
import { EMULATOR_OPTIONS, MAX_RETRIES } from '../emulator-options.js';
import type { EmulatorOptions } from '../emulator-options.js';
import { FaultSettings } from '../fault-settings.js';
import { webhookBody } from '../platform-event.js';
import type { EventSink, PlatformEvent } from '../platform-event.js';
import { seededShuffle } from '../seeded-random.js';
import { SubscriptionRegistry } from './subscription.registry.js';
import type { WebhookEndpoint } from './subscription.registry.js';

/** How long the reorder buffer waits for another delivery before it releases what it holds. */
const REORDER_IDLE_FLUSH_MS = 100;
const USER_AGENT = 'menu-sync-emulator';
const IDLE_SOCKET_MS = 4000;
/** What a long-running emulator keeps in memory: the newest events and attempt records, trimmed in chunks. */
const MAX_EVENTS = 100_000;
const TRIM_EVENTS = 10_000;
const MAX_RECORDS = 500_000;
const TRIM_RECORDS = 50_000;

/** One attempt to deliver one event to one endpoint, as `GET /_emulator/deliveries` lists it. */
export interface DeliveryAttempt {
  delivery_id: string;
  subscription_id: string;
  event_id: string;
  event_type: string;
  callback_uri: string;
  /** 1 for the first send, up to 1 + MAX_RETRIES. */
  attempt: number;
  /** The receiver's HTTP status; 0 for a timeout, a network error or an injected failure. */
  status: number;
  at: string;
  duration_ms: number;
  fault?: 'injected';
}

/** One event on its way to one endpoint; a duplicated event makes two of these. */
interface Delivery {
  id: string;
  event: PlatformEvent;
  endpoint: WebhookEndpoint;
  body: string;
  attemptsMade: number;
}

/**
 * Sends every published event to the matching webhook endpoints the way the platform does (spec:
 * Events, delivery rules; docs/reference.md §9): retried at most 5 times on the configured schedule, each
 * delay counted from the end of the failed attempt. Faults are seeded, so a run repeats exactly.
 * Pipeline: reorder buffer → FIFO queue → at most `deliveryConcurrency` attempts in flight.
 */
@Injectable()
export class DeliveryService implements EventSink, OnModuleDestroy {
  private readonly published: PlatformEvent[] = [];
  private readonly byId = new Map<string, PlatformEvent>();
  /** Indexed by dispatch sequence - 1: the list stays in the order attempts started, holes are in flight. */
  private readonly records: DeliveryAttempt[] = [];
  /** Attempt records dropped from the front of `records` (the oldest), so slots stay sequence - 1 - dropped. */
  private droppedRecords = 0;
  private buffer: Delivery[] = [];
  private readonly queue: Delivery[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly inFlight = new Set<AbortController>();
  private idleFlush: NodeJS.Timeout | undefined;
  private running = 0;
  private unfinished = 0;
  private lastDeliveryId = 0;
  private lastSequence = 0;
  private waiters: (() => void)[] = [];
  private stopped = false;
  // Idle sockets are dropped before a Node server's default 5 s keep-alive ends, so a send rarely
  // meets a connection the receiver is closing (which would count as a failed attempt).
  private readonly httpAgent = new HttpAgent({ keepAlive: true, timeout: IDLE_SOCKET_MS });
  private readonly httpsAgent = new HttpsAgent({ keepAlive: true, timeout: IDLE_SOCKET_MS });

  constructor(
    @Inject(EMULATOR_OPTIONS) private readonly options: EmulatorOptions,
    private readonly faults: FaultSettings,
    private readonly subscriptions: SubscriptionRegistry,
    private readonly clock: Clock,
  ) {}

  publish(event: PlatformEvent): void {
    this.published.push(event);
    this.byId.set(event.id, event);
    // A long-running emulator keeps the newest events only (resend and GET /_emulator/events see those).
    if (this.published.length > MAX_EVENTS + TRIM_EVENTS) {
      for (const old of this.published.splice(0, TRIM_EVENTS)) this.byId.delete(old.id);
    }
    this.deliver(event);
  }

  /** Delivers a published event again, afresh (attempts from 1); 0 when the event is unknown. */
  resend(eventId: string): number {
    const event = this.byId.get(eventId);
    return event === undefined ? 0 : this.deliver(event);
  }

  hasEvent(eventId: string): boolean {
    return this.byId.has(eventId);
  }

  events(): PlatformEvent[] {
    return [...this.published];
  }

  /** Finished attempts, in the order they started. */
  attempts(): DeliveryAttempt[] {
    return this.records.filter((record) => record !== undefined);
  }

  /** Deliveries not finished: buffered, queued, in flight or waiting for a retry. */
  pending(): number {
    return this.unfinished;
  }

  /** Resolves once every delivery succeeded or gave up (or the service stopped). */
  settled(): Promise<void> {
    if (this.unfinished === 0 || this.stopped) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** The oldest records go first; attempts still in flight are the newest, near the end. */
  private trimRecords(): void {
    if (this.records.length <= MAX_RECORDS + TRIM_RECORDS) return;
    this.records.splice(0, TRIM_RECORDS);
    this.droppedRecords += TRIM_RECORDS;
  }

  /** Cancels every timer and aborts the requests in flight; nothing is sent afterwards. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.idleFlush = undefined;
    for (const controller of this.inFlight) controller.abort();
    this.buffer = [];
    this.queue.length = 0;
    this.unfinished = 0;
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
    this.wakeWaiters();
  }

  onModuleDestroy(): void {
    this.stop();
  }

  /** Creates the deliveries of one event (two per endpoint when duplicated); returns how many. */
  private deliver(event: PlatformEvent): number {
    if (this.stopped) return 0;
    const { duplicate_rate } = this.faults.current;
    let created = 0;
    for (const endpoint of this.subscriptions.matching(event)) {
      const body = JSON.stringify(webhookBody(event, endpoint.callbackUri));
      const copies = this.faults.draw('duplicate', event.ordinal, endpoint.id) < duplicate_rate ? 2 : 1;
      for (let copy = 0; copy < copies; copy++) {
        this.lastDeliveryId += 1;
        this.admit({ id: String(this.lastDeliveryId), event, endpoint, body, attemptsMade: 0 });
        created += 1;
      }
    }
    return created;
  }

  private admit(delivery: Delivery): void {
    this.unfinished += 1;
    const window = this.faults.current.reorder_window;
    if (window <= 1) {
      this.release();
      this.enqueue(delivery);
      return;
    }
    this.buffer.push(delivery);
    if (this.buffer.length >= window) this.release();
    else this.armIdleFlush();
  }

  private armIdleFlush(): void {
    if (this.idleFlush !== undefined) this.cancel(this.idleFlush);
    this.idleFlush = this.later(REORDER_IDLE_FLUSH_MS, () => {
      this.idleFlush = undefined;
      this.release();
    });
  }

  /** Sends the buffered deliveries on, in an order drawn from the seed and the buffer's first event. */
  private release(): void {
    if (this.idleFlush !== undefined) this.cancel(this.idleFlush);
    this.idleFlush = undefined;
    if (this.buffer.length === 0) return;
    const released = seededShuffle(this.buffer, this.faults.seed, 'reorder', this.buffer[0].event.ordinal);
    this.buffer = [];
    for (const delivery of released) this.enqueue(delivery);
  }

  private enqueue(delivery: Delivery): void {
    this.queue.push(delivery);
    this.pump();
  }

  private pump(): void {
    const concurrency = Math.max(1, this.options.deliveryConcurrency);
    while (!this.stopped && this.running < concurrency && this.queue.length > 0) {
      const delivery = this.queue.shift() as Delivery;
      this.running += 1;
      void this.attempt(delivery).finally(() => {
        this.running -= 1;
        this.pump();
      });
    }
  }

  private async attempt(delivery: Delivery): Promise<void> {
    const { delay_ms } = this.faults.current;
    if (delay_ms > 0) await new Promise<void>((resolve) => this.later(delay_ms, resolve));
    if (this.stopped) return;
    delivery.attemptsMade += 1;
    this.lastSequence += 1;
    const sequence = this.lastSequence;
    const at = this.clock.now().toISOString();
    const started = performance.now();
    const injected = delivery.attemptsMade <= this.faults.current.fail_first_attempts;
    const status = injected ? 0 : await this.send(delivery);
    if (this.stopped) return;
    this.trimRecords();
    const slot = sequence - 1 - this.droppedRecords;
    if (slot >= 0)
      this.records[slot] = {
        delivery_id: delivery.id,
        subscription_id: delivery.endpoint.id,
        event_id: delivery.event.id,
        event_type: delivery.event.eventType,
        callback_uri: delivery.endpoint.callbackUri,
        attempt: delivery.attemptsMade,
        status,
        at,
        duration_ms: Math.round(performance.now() - started),
        ...(injected ? { fault: 'injected' as const } : {}),
      };
    this.afterAttempt(delivery, status >= 200 && status < 300);
  }

  /** Retries are scheduled from now, the end of the failed attempt, as the platform counts them. */
  private afterAttempt(delivery: Delivery, succeeded: boolean): void {
    const retriesMade = delivery.attemptsMade - 1;
    if (succeeded || retriesMade >= MAX_RETRIES) {
      this.finish();
      return;
    }
    this.later(this.options.retryScheduleMs[retriesMade], () => this.enqueue(delivery));
  }

  private finish(): void {
    this.unfinished -= 1;
    if (this.unfinished === 0) this.wakeWaiters();
  }

  private wakeWaiters(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  private send(delivery: Delivery): Promise<number> {
    const controller = new AbortController();
    this.inFlight.add(controller);
    const timeout = setTimeout(() => controller.abort(), this.options.deliveryTimeoutMs);
    timeout.unref();
    const agents = { http: this.httpAgent, https: this.httpsAgent };
    return postJson(delivery.endpoint.callbackUri, delivery.body, controller.signal, agents).finally(() => {
      clearTimeout(timeout);
      this.inFlight.delete(controller);
    });
  }

  /** A real timer that never keeps the process alive and that stop() cancels. */
  private later(ms: number, run: () => void): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      run();
    }, ms);
    timer.unref();
    this.timers.add(timer);
    return timer;
  }

  private cancel(timer: NodeJS.Timeout): void {
    clearTimeout(timer);
    this.timers.delete(timer);
  }
}

/** POSTs the body and resolves with the status once the answer is read; 0 for any failure or abort. */
function postJson(
  uri: string,
  body: string,
  signal: AbortSignal,
  agents: { http: HttpAgent; https: HttpsAgent },
): Promise<number> {
  return new Promise((resolve) => {
    try {
      const url = new URL(uri);
      const secure = url.protocol === 'https:';
      const request = (secure ? httpsRequest : httpRequest)(
        url,
        {
          method: 'POST',
          signal,
          agent: secure ? agents.https : agents.http,
          headers: {
            'Content-Type': 'application/json',
            'Content-Length': Buffer.byteLength(body),
            'User-Agent': USER_AGENT,
          },
        },
        (response) => {
          response.on('end', () => resolve(response.statusCode ?? 0));
          response.on('close', () => resolve(response.complete ? (response.statusCode ?? 0) : 0));
          response.on('error', () => resolve(0));
          response.resume();
        },
      );
      request.on('error', () => resolve(0));
      request.end(body);
    } catch {
      resolve(0);
    }
  });
}
