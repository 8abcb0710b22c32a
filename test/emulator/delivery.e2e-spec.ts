import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SpecEventName } from '../../src/domain/event-names.js';
import { DeliveryService } from '../../src/emulator/delivery/delivery.service.js';
import type { DeliveryAttempt } from '../../src/emulator/delivery/delivery.service.js';
import { SubscriptionRegistry } from '../../src/emulator/delivery/subscription.registry.js';
import type { EmulatorOptions } from '../../src/emulator/emulator-options.js';
import type { RunningEmulator } from '../../src/emulator/emulator.factory.js';
import type { Faults } from '../../src/emulator/fault-settings.js';
import { DEMO_USER_ID } from '../../src/emulator/oauth/oauth-server.service.js';
import { webhookBody } from '../../src/emulator/platform-event.js';
import type { PlatformEvent } from '../../src/emulator/platform-event.js';
import { eventually } from '../support/eventually.js';
import { bootEmulator, call, control, obtainTokens } from './emulator-client.js';

const SCHEDULE_MS = 20;
const TIMEOUT_MS = 300;
const OWNER = '4242';

/** A receiver's view of one delivery. */
interface Received {
  body: string;
  headers: IncomingHttpHeaders;
  at: number;
}

interface Receiver {
  url: string;
  received: Received[];
  close(): Promise<void>;
}

/** A local webhook receiver: `answer` gives the status of the n-th request (from 0), possibly late. */
async function startReceiver(answer: (n: number) => number | Promise<number> = () => 204): Promise<Receiver> {
  const received: Received[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const n = received.length;
      received.push({ body: Buffer.concat(chunks).toString('utf8'), headers: request.headers, at: Date.now() });
      void Promise.resolve(answer(n)).then((status) => {
        if (!response.destroyed) response.writeHead(status).end();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function platformEvent(ordinal: number, overrides: Partial<PlatformEvent> = {}): PlatformEvent {
  const seq = 9000 + ordinal;
  return {
    id: String(seq),
    seq,
    ordinal,
    eventType: 'product.updated',
    createdAt: new Date(Date.UTC(2025, 0, 1, 12, 0, 0, ordinal)).toISOString(),
    ownerId: OWNER,
    subject: { id: String(100 + ordinal), type: 'product' },
    included: [
      { id: String(100 + ordinal), type: 'product', attributes: { title: `Product ${ordinal}`, available: true } },
    ],
    ...overrides,
  };
}

function bootFast(overrides: Partial<EmulatorOptions> = {}): Promise<RunningEmulator> {
  return bootEmulator({
    retryScheduleMs: Array(5).fill(SCHEDULE_MS),
    deliveryTimeoutMs: TIMEOUT_MS,
    deliveryConcurrency: 1,
    seed: 7,
    ...overrides,
  });
}

function subscribe(
  emulator: RunningEmulator,
  callbackUri: string,
  enabledEvents: SpecEventName[] = ['product.updated'],
  ownerId = OWNER,
) {
  return emulator.app
    .get(SubscriptionRegistry)
    .add({ ownerId, callbackUri, enabledEvents, request: { headers: {}, form: {} } });
}

async function setFaults(emulator: RunningEmulator, faults: Partial<Faults>): Promise<void> {
  const reply = await control(emulator, 'POST', '/_emulator/faults', faults);
  expect(reply.status).toBe(200);
}

async function deliveries(emulator: RunningEmulator): Promise<{ data: DeliveryAttempt[]; pending: number }> {
  const reply = await control(emulator, 'GET', '/_emulator/deliveries');
  expect(reply.status).toBe(200);
  return reply.json;
}

/** The ordinals of the bodies a receiver got, in arrival order. */
function arrivalOrder(receiver: Receiver): number[] {
  return receiver.received.map((entry) => JSON.parse(entry.body).data.attributes.id - 9000);
}

describe('webhook delivery (emulator)', () => {
  let emulator: RunningEmulator;
  let receiver: Receiver;
  let service: DeliveryService;

  let running: (() => Promise<void>)[] = [];

  async function boot(
    answer?: (n: number) => number | Promise<number>,
    overrides: Partial<EmulatorOptions> = {},
  ): Promise<void> {
    receiver = await startReceiver(answer);
    emulator = await bootFast(overrides);
    service = emulator.app.get(DeliveryService);
    running.push(emulator.close, receiver.close);
  }

  async function shutDown(): Promise<void> {
    const closers = running;
    running = [];
    for (const close of closers) await close();
  }

  afterEach(shutDown);

  it('keeps the newest events only in a long run (memory stays bounded); an event dropped cannot be resent', async () => {
    await boot();
    const count = 110_001;
    for (let ordinal = 0; ordinal < count; ordinal++) service.publish(platformEvent(ordinal));
    const kept = service.events();
    expect(kept.length).toBeLessThanOrEqual(110_000);
    expect(kept.length).toBeGreaterThanOrEqual(100_000);
    // Exactly the newest ones, in order: the oldest kept is the one after the last dropped.
    const oldestKept = count - kept.length;
    expect(kept.map((event) => event.ordinal)).toEqual(Array.from({ length: kept.length }, (_, i) => oldestKept + i));
    expect(service.hasEvent(platformEvent(oldestKept - 1).id)).toBe(false);
    expect(service.hasEvent(platformEvent(oldestKept).id)).toBe(true);
    // Subscribed only now (so the run above delivered nothing): a kept event is resent, a dropped one cannot be.
    subscribe(emulator, receiver.url);
    expect(service.resend(platformEvent(0).id)).toBe(0);
    expect(service.resend(platformEvent(count - 1).id)).toBe(1);
    await service.settled();
    expect(arrivalOrder(receiver)).toEqual([count - 1]);
  });

  it('POSTs exactly the spec body for the callback URI, as JSON, and records the attempt', async () => {
    await boot();
    subscribe(emulator, receiver.url);
    const event = platformEvent(0);

    service.publish(event);
    await service.settled();

    expect(receiver.received).toHaveLength(1);
    expect(receiver.received[0].body).toBe(JSON.stringify(webhookBody(event, receiver.url)));
    expect(receiver.received[0].headers['content-type']).toBe('application/json');
    expect(receiver.received[0].headers['user-agent']).toBe('menu-sync-emulator');
    const list = await deliveries(emulator);
    expect(list).toEqual({
      data: [
        expect.objectContaining({
          event_id: event.id,
          event_type: 'product.updated',
          callback_uri: receiver.url,
          attempt: 1,
          status: 204,
        }),
      ],
      pending: 0,
    });
    expect(new Date(list.data[0].at).toISOString()).toBe(list.data[0].at);
  });

  it('delivers only to endpoints of the event owner that enabled its event name', async () => {
    await boot();
    const other = await startReceiver();
    const stranger = await startReceiver();
    try {
      subscribe(emulator, receiver.url, ['product.updated', 'order.created']);
      subscribe(emulator, other.url, ['product.created']);
      subscribe(emulator, stranger.url, ['product.updated'], 'someone-else');

      service.publish(platformEvent(0));
      service.publish(platformEvent(1, { eventType: 'order.created', subject: { id: '1', type: 'order' } }));
      service.publish(platformEvent(2, { eventType: 'trait.created', subject: { id: '3', type: 'trait' } }));
      await service.settled();

      expect(receiver.received.map((entry) => JSON.parse(entry.body).data.attributes.event_type)).toEqual([
        'product.updated',
        'order.created',
      ]);
      expect(other.received).toHaveLength(0);
      expect(stranger.received).toHaveLength(0);
    } finally {
      await other.close();
      await stranger.close();
    }
  });

  it('retries a failing receiver 5 times, each delay counted from the end of the failed attempt, then gives up', async () => {
    const answerAfterMs = 60;
    await boot(() => sleep(answerAfterMs).then(() => 500));
    subscribe(emulator, receiver.url);

    service.publish(platformEvent(0));
    await service.settled();
    await sleep(SCHEDULE_MS * 10);

    expect(receiver.received).toHaveLength(6);
    const { data, pending } = await deliveries(emulator);
    expect(pending).toBe(0);
    expect(data.map((attempt) => [attempt.attempt, attempt.status])).toEqual([1, 2, 3, 4, 5, 6].map((n) => [n, 500]));
    for (let i = 1; i < data.length; i++) {
      const previousEnd = Date.parse(data[i - 1].at) + data[i - 1].duration_ms;
      expect(Date.parse(data[i].at) - previousEnd).toBeGreaterThanOrEqual(SCHEDULE_MS - 2);
      expect(Date.parse(data[i].at) - Date.parse(data[i - 1].at)).toBeGreaterThanOrEqual(
        answerAfterMs + SCHEDULE_MS - 2,
      );
    }
  });

  it('records a timeout as status 0 and retries it', async () => {
    await boot((n) => (n === 0 ? sleep(TIMEOUT_MS * 3).then(() => 200) : 200));
    subscribe(emulator, receiver.url);

    service.publish(platformEvent(0));
    await service.settled();

    const { data } = await deliveries(emulator);
    expect(data.map((attempt) => [attempt.attempt, attempt.status])).toEqual([
      [1, 0],
      [2, 200],
    ]);
    expect(data[0].duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(data[0].duration_ms).toBeLessThan(TIMEOUT_MS * 3);
  });

  it('records a refused connection as status 0', async () => {
    await boot();
    const closed = await startReceiver();
    await closed.close();
    subscribe(emulator, closed.url);

    service.publish(platformEvent(0));
    await service.settled();

    const { data } = await deliveries(emulator);
    expect(data.map((attempt) => attempt.status)).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('fail_first_attempts answers the first attempts as failed without sending them', async () => {
    await boot();
    subscribe(emulator, receiver.url);
    await setFaults(emulator, { fail_first_attempts: 2 });

    service.publish(platformEvent(0));
    await service.settled();

    expect(receiver.received).toHaveLength(1);
    const { data } = await deliveries(emulator);
    expect(data.map(({ attempt, status, fault }) => ({ attempt, status, fault }))).toEqual([
      { attempt: 1, status: 0, fault: 'injected' },
      { attempt: 2, status: 0, fault: 'injected' },
      { attempt: 3, status: 204, fault: undefined },
    ]);
  });

  it('duplicate_rate 1 delivers every event twice with identical bytes', async () => {
    await boot();
    subscribe(emulator, receiver.url);
    await setFaults(emulator, { duplicate_rate: 1 });

    for (let ordinal = 0; ordinal < 3; ordinal++) service.publish(platformEvent(ordinal));
    await service.settled();

    expect(receiver.received).toHaveLength(6);
    for (let ordinal = 0; ordinal < 3; ordinal++) {
      const copies = receiver.received.filter((entry) => JSON.parse(entry.body).data.attributes.id === 9000 + ordinal);
      expect(copies).toHaveLength(2);
      expect(copies[0].body).toBe(copies[1].body);
    }
    const { data } = await deliveries(emulator);
    expect(new Set(data.map((attempt) => attempt.delivery_id)).size).toBe(6);
  });

  describe('reorder_window', () => {
    async function receivedOrder(seed: number, events = 8): Promise<number[]> {
      await boot(undefined, { seed });
      subscribe(emulator, receiver.url);
      await setFaults(emulator, { reorder_window: events });
      for (let ordinal = 0; ordinal < events; ordinal++) service.publish(platformEvent(ordinal));
      await service.settled();
      const order = arrivalOrder(receiver);
      await shutDown();
      return order;
    }

    it('sends a window of events as a seeded permutation: the same seed repeats it, another seed does not', async () => {
      const first = await receivedOrder(7);
      const again = await receivedOrder(7);
      const otherSeed = await receivedOrder(8);

      expect([...first].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(first).not.toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(again).toEqual(first);
      expect([...otherSeed].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(otherSeed).not.toEqual(first);
    });

    it('releases a partly filled window after a short idle time', async () => {
      await boot();
      subscribe(emulator, receiver.url);
      await setFaults(emulator, { reorder_window: 10 });

      for (let ordinal = 0; ordinal < 3; ordinal++) service.publish(platformEvent(ordinal));
      expect(service.pending()).toBe(3);
      await sleep(20);
      expect(receiver.received).toHaveLength(0);
      await service.settled();

      expect([...arrivalOrder(receiver)].sort()).toEqual([0, 1, 2]);
    });
  });

  it('delay_ms waits before each send', async () => {
    await boot();
    subscribe(emulator, receiver.url);
    await setFaults(emulator, { delay_ms: 150 });

    const publishedAt = Date.now();
    service.publish(platformEvent(0));
    await service.settled();

    expect(receiver.received[0].at - publishedAt).toBeGreaterThanOrEqual(145);
  });

  it('keeps the dispatch order of first attempts for the same seed, faults and events', async () => {
    async function firstAttempts(): Promise<string[]> {
      await boot((n) => (n % 3 === 0 ? 500 : 204));
      subscribe(emulator, receiver.url);
      await setFaults(emulator, { duplicate_rate: 0.5, fail_first_attempts: 1, reorder_window: 4 });
      for (let ordinal = 0; ordinal < 10; ordinal++) service.publish(platformEvent(ordinal));
      await service.settled();
      const { data } = await deliveries(emulator);
      await shutDown();
      return data
        .filter((attempt) => attempt.attempt === 1)
        .map((attempt) => `${attempt.event_id}/${attempt.status}/${attempt.fault}`);
    }

    const first = await firstAttempts();
    expect(first.length).toBeGreaterThan(10);
    expect(await firstAttempts()).toEqual(first);
  });

  it('settled() waits for retries; pending() counts unfinished deliveries', async () => {
    await boot((n) => (n < 2 ? 503 : 200));
    subscribe(emulator, receiver.url);
    expect(service.pending()).toBe(0);
    await service.settled();

    service.publish(platformEvent(0));
    expect(service.pending()).toBe(1);
    await service.settled();

    expect(service.pending()).toBe(0);
    expect(receiver.received).toHaveLength(3);
  });

  it('stop() cancels pending retries and is idempotent', async () => {
    await boot(() => 500);
    subscribe(emulator, receiver.url);

    service.publish(platformEvent(0));
    await eventually(async () => expect(receiver.received.length).toBeGreaterThanOrEqual(1));
    service.stop();
    service.stop();
    await service.settled();
    const seen = receiver.received.length;
    await sleep(SCHEDULE_MS * 8);

    expect(receiver.received).toHaveLength(seen);
    expect(service.pending()).toBe(0);
  });

  describe('control API', () => {
    beforeEach(() => boot());

    it('POST /_emulator/deliveries/resend sends a stored event afresh, attempt numbering from 1', async () => {
      subscribe(emulator, receiver.url);
      const event = platformEvent(0);
      service.publish(event);
      await service.settled();

      const reply = await control(emulator, 'POST', '/_emulator/deliveries/resend', { event_id: event.id });
      await service.settled();

      expect(reply.status).toBe(202);
      expect(reply.json).toEqual({ deliveries: 1 });
      expect(receiver.received.map((entry) => entry.body)).toEqual([
        receiver.received[0].body,
        receiver.received[0].body,
      ]);
      const { data } = await deliveries(emulator);
      expect(data.map((attempt) => attempt.attempt)).toEqual([1, 1]);
    });

    it('resend of an unknown event is 404 problem+json', async () => {
      const reply = await control(emulator, 'POST', '/_emulator/deliveries/resend', { event_id: '404404' });

      expect(reply.status).toBe(404);
      expect(reply.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(reply.json).toMatchObject({ status: 404, detail: expect.stringContaining('404404') });
    });

    it('GET /_emulator/events lists a summary of each published event', async () => {
      const event = platformEvent(0);
      service.publish(event);

      const reply = await control(emulator, 'GET', '/_emulator/events');

      expect(reply.json).toEqual({
        data: [
          {
            event_id: event.id,
            event_type: event.eventType,
            subject: event.subject,
            owner_id: OWNER,
            created_at: event.createdAt,
          },
        ],
      });
    });

    it('POST /_emulator/faults replaces the settings and answers all of them; GET reads them', async () => {
      const reply = await control(emulator, 'POST', '/_emulator/faults', { duplicate_rate: 0.25, delay_ms: 5 });

      expect(reply.status).toBe(200);
      expect(reply.json).toMatchObject({
        duplicate_rate: 0.25,
        reorder_window: 0,
        fail_first_attempts: 0,
        delay_ms: 5,
      });
      expect((await control(emulator, 'GET', '/_emulator/faults')).json).toEqual(reply.json);
      await setFaults(emulator, { reorder_window: 3 });
      expect((await control(emulator, 'GET', '/_emulator/faults')).json).toMatchObject({
        duplicate_rate: 0,
        reorder_window: 3,
        delay_ms: 0,
      });
    });

    it.each([
      [{ surprise_rate: 1 }, 'surprise_rate'],
      [{ duplicate_rate: 1.5 }, 'duplicate_rate'],
      [{ reorder_window: -1 }, 'reorder_window'],
      [{ fail_first_attempts: 'two' }, 'fail_first_attempts'],
    ])('POST /_emulator/faults %j → 422 naming %s', async (body, field) => {
      const reply = await control(emulator, 'POST', '/_emulator/faults', body);

      expect(reply.status).toBe(422);
      expect(reply.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(reply.json).toMatchObject({ status: 422, field, detail: expect.stringContaining(field) });
    });
  });
});

describe('POST /webhook_endpoints (emulator)', () => {
  const ACCEPT = 'application/vnd.service.v2';
  let emulator: RunningEmulator;
  let token: string;

  beforeAll(async () => {
    emulator = await bootFast();
    token = (await obtainTokens(emulator)).access_token;
  });

  afterAll(async () => {
    await emulator.close();
  });

  function register(
    form: string,
    headers: Record<string, string> = { accept: ACCEPT, authorization: `Bearer ${token}` },
  ) {
    return call(emulator, '/webhook_endpoints', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: form,
    });
  }

  function expectApiError(reply: Awaited<ReturnType<typeof call>>, status: number): void {
    expect(reply.status).toBe(status);
    expect(reply.headers.get('content-type')).toMatch(/^application\/vnd\.api\+json/);
    expect(reply.json.errors[0]).toMatchObject({ status: String(status) });
  }

  it('406 without the Accept header, before the token is looked at', async () => {
    const reply = await register('callback_uri=http%3A%2F%2F127.0.0.1%2Fh&enabled_events%5B%5D=order.created', {});

    expectApiError(reply, 406);
  });

  it('401 without a token', async () => {
    const reply = await register('callback_uri=http%3A%2F%2F127.0.0.1%2Fh&enabled_events%5B%5D=order.created', {
      accept: ACCEPT,
    });

    expectApiError(reply, 401);
  });

  it('422 naming an unknown event', async () => {
    const reply = await register(
      'callback_uri=http%3A%2F%2F127.0.0.1%2Fh&enabled_events%5B%5D=order.created&enabled_events%5B%5D=order.teleported',
    );

    expectApiError(reply, 422);
    expect(reply.json.errors[0]).toMatchObject({
      detail: expect.stringContaining('order.teleported'),
      source: { pointer: '/enabled_events' },
    });
  });

  it.each([
    ['enabled_events%5B%5D=order.created', '/callback_uri'],
    ['callback_uri=%2Frelative&enabled_events%5B%5D=order.created', '/callback_uri'],
    ['callback_uri=ftp%3A%2F%2F127.0.0.1%2Fh&enabled_events%5B%5D=order.created', '/callback_uri'],
    ['callback_uri=http%3A%2F%2F127.0.0.1%2Fh', '/enabled_events'],
  ])('422 for %s, pointing at %s', async (form, pointer) => {
    const reply = await register(form);

    expectApiError(reply, 422);
    expect(reply.json.errors[0].source).toEqual({ pointer });
  });

  it('403 when the token lacks the scope of an enabled event', async () => {
    const menuOnly = (await obtainTokens(emulator, 'read_menu')).access_token;

    const reply = await register('callback_uri=http%3A%2F%2F127.0.0.1%2Fh&enabled_events%5B%5D=order.created', {
      accept: ACCEPT,
      authorization: `Bearer ${menuOnly}`,
    });

    expectApiError(reply, 403);
  });

  it('201 with the endpoint; the control API lists it with the exact form body, and deletes it', async () => {
    const form =
      'callback_uri=http%3A%2F%2F127.0.0.1%3A9%2Fhooks&enabled_events%5B%5D=order.created&enabled_events%5B%5D=product.updated';

    const reply = await register(form);

    expect(reply.status).toBe(201);
    expect(reply.headers.get('content-type')).toMatch(/^application\/vnd\.api\+json/);
    expect(reply.json).toEqual({
      data: {
        id: expect.any(String),
        type: 'webhook_endpoint',
        attributes: {
          callback_uri: 'http://127.0.0.1:9/hooks',
          enabled_events: ['order.created', 'product.updated'],
          created_at: expect.any(String),
        },
      },
    });
    const listed = (await control(emulator, 'GET', '/_emulator/webhook_endpoints')).json.data;
    const endpoint = listed.find((entry: { id: string }) => entry.id === reply.json.data.id);
    expect(endpoint).toMatchObject({
      owner_id: DEMO_USER_ID,
      callback_uri: 'http://127.0.0.1:9/hooks',
      enabled_events: ['order.created', 'product.updated'],
      request: {
        form: { callback_uri: 'http://127.0.0.1:9/hooks', 'enabled_events[]': ['order.created', 'product.updated'] },
        headers: expect.objectContaining({ accept: ACCEPT, authorization: '[redacted]' }),
      },
    });
    expect(JSON.stringify(endpoint)).not.toContain(token);

    expect((await control(emulator, 'DELETE', `/_emulator/webhook_endpoints/${endpoint.id}`)).status).toBe(204);
    expect((await control(emulator, 'DELETE', `/_emulator/webhook_endpoints/${endpoint.id}`)).status).toBe(404);
  });

  it('accepts a single enabled_events value under either key', async () => {
    const one = await register('callback_uri=https%3A%2F%2Fexample.test%2Fh&enabled_events%5B%5D=trait.created');
    const bare = await register('callback_uri=https%3A%2F%2Fexample.test%2Fh&enabled_events=trait.updated');

    expect(one.json.data.attributes.enabled_events).toEqual(['trait.created']);
    expect(bare.json.data.attributes.enabled_events).toEqual(['trait.updated']);
  });
});
