import { Logger } from '@nestjs/common';
import { EventEmitterModule } from '@nestjs/event-emitter';
import { Test } from '@nestjs/testing';
import type { TestingModule } from '@nestjs/testing';
import { createHash, randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createTestDatabase, openDataSource } from '../../test/support/database.js';
import type { TestDatabase } from '../../test/support/database.js';
import { webhookEvent } from '../../test/support/webhook-events.js';
import type { EventOptions } from '../../test/support/webhook-events.js';
import { AppError } from '../common/app-error.js';
import { loadConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { DatabaseModule } from '../database/database.module.js';
import { EventLogQueryService } from '../event-log/event-log-query.service.js';
import { EventLogModule } from '../event-log/event-log.module.js';
import { ObservabilityModule } from '../observability/observability.module.js';
import { IngressModule } from './ingress.module.js';
import { Delivery, IngressService } from './ingress.service.js';
import { QuarantineService } from './quarantine.service.js';
import { WebhookKeyRegistry, hashWebhookKey } from './webhook-key.registry.js';
import { WebhookKeyRepository } from './webhook-key.repository.js';

const ENV_KEY = randomBytes(32).toString('base64url');
const JSON_TYPE = 'application/json';

/** The forms a key could take in a row's text: itself, and bytea hex of it as UTF-8 and UTF-16. */
function forms(key: string): string[] {
  return [key, Buffer.from(key).toString('hex'), Buffer.from(key, 'utf16le').toString('hex')];
}

/** A spec-shaped event whose `data.attributes.uri` is the callback URI holding `key`, as the platform sends. */
function eventFor(key: string, options: EventOptions = {}) {
  const event = webhookEvent(options) as { data: { id: string; attributes: Record<string, unknown> } };
  event.data.attributes.uri = `https://menu-sync.example/webhooks/${key}`;
  return event;
}

describe('IngressService: webhook keys never stored in clear (PostgreSQL)', () => {
  let database: TestDatabase;
  let moduleRef: TestingModule;
  let ingress: IngressService;
  let events: EventLogQueryService;
  let quarantine: QuarantineService;
  let dataSource: DataSource;
  let storedKey: string;

  beforeAll(async () => {
    Logger.overrideLogger(false);
    database = await createTestDatabase();
    const config = loadConfig({
      DATABASE_URL: database.url,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      WEBHOOK_KEYS: ENV_KEY,
    });
    moduleRef = await Test.createTestingModule({
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot({ url: database.url, poolSize: 4 }),
        EventEmitterModule.forRoot(),
        ObservabilityModule,
        EventLogModule,
        IngressModule,
      ],
    }).compile();
    await moduleRef.init();
    ingress = moduleRef.get(IngressService);
    events = moduleRef.get(EventLogQueryService, { strict: false });
    quarantine = moduleRef.get(QuarantineService, { strict: false });
    dataSource = await openDataSource(database.url, 2);
    // A connection's key: stored as its hash only, accepted at once.
    storedKey = randomBytes(32).toString('base64url');
    const keyHash = hashWebhookKey(storedKey);
    moduleRef.get(WebhookKeyRegistry).learn(keyHash, await moduleRef.get(WebhookKeyRepository).add(keyHash, null));
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await moduleRef?.close();
    await database?.drop();
  });

  const deliver = (key: string, body: Buffer, contentType = JSON_TYPE): Promise<unknown> =>
    ingress.receive({ key, body, contentType, receivedAt: new Date() } satisfies Delivery);

  async function positionOf(key: string, body: Buffer, contentType?: string): Promise<number> {
    const outcome = (await deliver(key, body, contentType)) as { status: number; body: { position: number } };
    expect(outcome.status).toBe(202);
    return outcome.body.position;
  }

  /** Every row of a table as PostgreSQL prints it (as pg_dump would, bytea in hex). */
  async function rowsOf(table: 'event_log' | 'quarantine'): Promise<string> {
    const rows: Array<{ row: string }> = await dataSource.query(`SELECT t::text AS row FROM ${table} t`);
    return rows.map((r) => r.row).join('\n');
  }

  it.each([
    ['a WEBHOOK_KEYS key', () => ENV_KEY],
    ["a connection's key", () => storedKey],
  ])(
    'stores a delivery holding %s redacted, only the key sealed, and /raw still answers its exact bytes',
    async (_name, keyOf) => {
      const key = keyOf();
      const body = Buffer.from(JSON.stringify(eventFor(key)));
      const position = await positionOf(key, body);

      const dump = await rowsOf('event_log');
      expect(dump).toContain('[redacted]');
      for (const form of forms(key)) expect(dump).not.toContain(form);

      const entry = JSON.parse(await events.get(position));
      expect(entry.payload.data.attributes.uri).toBe('https://menu-sync.example/webhooks/[redacted]');
      expect(entry.sha256).toBe(createHash('sha256').update(body).digest('hex'));
      const raw = await events.raw(position);
      expect(raw.body.equals(body)).toBe(true);
      expect(raw.contentType).toBe(JSON_TYPE);

      // Only the key is sealed (a few dozen bytes), with where it stood: the payload is the rest of the bytes.
      const [row] = await dataSource.query(
        `SELECT raw_sealed, raw_body IS NOT NULL AS kept, length(raw_key) AS sealed_key_bytes, raw_key_at, sha256, key_id
           FROM event_log WHERE position = $1`,
        [position],
      );
      expect(row).toMatchObject({
        raw_sealed: false,
        kept: false,
        raw_key_at: [body.indexOf(key)],
        key_id: key === ENV_KEY ? 'env:1' : expect.stringMatching(/^key:\d+$/),
      });
      expect(row.sealed_key_bytes).toBeLessThan(100);
      expect((row.sha256 as Buffer).equals(createHash('sha256').update(raw.body).digest())).toBe(true);
    },
  );

  it('keeps a body in another charset exactly too', async () => {
    const body = Buffer.from(`\ufeff${JSON.stringify(eventFor(ENV_KEY))}`, 'utf16le');
    const position = await positionOf(ENV_KEY, body, 'application/json; charset=utf-16le');
    for (const form of forms(ENV_KEY)) expect(await rowsOf('event_log')).not.toContain(form);
    expect((await events.raw(position)).body.equals(body)).toBe(true);
  });

  it('stores a body without the key as before: no raw_body when the bytes are the payload', async () => {
    const body = Buffer.from(JSON.stringify(webhookEvent()));
    const position = await positionOf(ENV_KEY, body);
    const [row] = await dataSource.query(
      `SELECT raw_body, raw_sealed, payload::text AS payload FROM event_log WHERE position = $1`,
      [position],
    );
    expect(row).toEqual({ raw_body: null, raw_sealed: false, payload: body.toString() });
    expect((await events.raw(position)).body.equals(body)).toBe(true);
  });

  it('answers a repeat holding the key as a duplicate of the original, storing nothing more', async () => {
    const event = eventFor(ENV_KEY);
    const position = await positionOf(ENV_KEY, Buffer.from(JSON.stringify(event)));
    await expect(deliver(ENV_KEY, Buffer.from(JSON.stringify({ ...event, extra: ENV_KEY })))).resolves.toEqual({
      status: 200,
      body: { status: 'duplicate', position },
    });
    for (const form of forms(ENV_KEY)) expect(await rowsOf('event_log')).not.toContain(form);
  });

  it.each<[string, (key: string) => Buffer]>([
    [
      'an invalid event',
      (key) => {
        const event = eventFor(key) as { data: Record<string, unknown> };
        delete event.data.relationships;
        return Buffer.from(JSON.stringify(event));
      },
    ],
    ['a body that is not JSON', (key) => Buffer.from(`{"uri":${key}}`)],
    [
      'a UTF-16 body that is not an event',
      (key) => Buffer.from(JSON.stringify({ uri: `https://h/webhooks/${key}` }), 'utf16le'),
    ],
  ])('quarantines %s with the key redacted', async (_name, bodyOf) => {
    const body = bodyOf(ENV_KEY);
    const utf16 = body.includes(0);
    const contentType = utf16 ? 'application/json; charset=utf-16le' : JSON_TYPE;
    const refusal = await deliver(ENV_KEY, body, contentType).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(AppError);
    expect((refusal as AppError).status).toBe(400);
    for (const form of forms(ENV_KEY)) {
      expect((refusal as AppError).detail).not.toContain(form.slice(0, 6));
      expect(await rowsOf('quarantine')).not.toContain(form);
    }
    const listed = (await quarantine.list({ after: 0, limit: 100 })).data.at(-1)!;
    expect(listed.sha256).toBe(createHash('sha256').update(body).digest('hex'));
    const bytes = Buffer.from(listed.body, listed.body_encoding === 'base64' ? 'base64' : 'utf8');
    const text = bytes.toString(utf16 ? 'utf16le' : 'utf8');
    expect(text).toContain('[redacted]');
    expect(text).not.toContain(ENV_KEY);
  });
});
