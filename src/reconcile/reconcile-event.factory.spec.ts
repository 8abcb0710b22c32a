import { createHash } from 'node:crypto';
import { DeliveryRejection } from '../ingress/webhook-event.parser.js';
import { eventIdPart, reconcileEntry } from './reconcile-event.factory.js';
import type { ReconcileChange } from './reconcile-event.factory.js';

const RUN = '0b6c7a52-9a43-4c2e-9d0e-3f1d2a7c5e11';
const FETCHED = new Date('2024-05-01T12:00:00.000Z');

const created = (id: string): ReconcileChange => ({
  eventType: 'product.created',
  subject: { type: 'product', id },
  ownerId: '4001',
  included: [{ id, type: 'product', attributes: { title: 'Soup' }, relationships: {} }],
});

describe('reconcileEntry (a difference as a log entry)', () => {
  it('given a short id, then the event id names it, and the version is the fetch time with attributes.id 0', () => {
    const entry = reconcileEntry(created('42'), RUN, FETCHED);
    expect(entry).toMatchObject({
      eventId: `reconcile:${RUN}:product:42`,
      eventType: 'product.created',
      subjectType: 'product',
      subjectId: '42',
      ownerId: '4001',
      occurredAt: FETCHED.toISOString(),
      eventSeq: '0',
      source: 'reconcile',
      keyId: null,
    });
  });

  it('given an id of 200 characters, then the event id holds its hash and stays short; the subject keeps the id', () => {
    const id = 'x'.repeat(200);
    const entry = reconcileEntry(created(id), RUN, FETCHED);
    const hash = createHash('sha256').update(id).digest('hex').slice(0, 32);
    expect(entry.eventId).toBe(`reconcile:${RUN}:product:sha256-${hash}`);
    expect(entry.eventId.length).toBeLessThan(120);
    expect(entry.subjectId).toBe(id);
  });

  it('given a destroy of a long id, then it is recorded too (no included resource)', () => {
    const id = '9'.repeat(250);
    const entry = reconcileEntry(
      { eventType: 'product.destroyed', subject: { type: 'product', id }, ownerId: '4001', included: [] },
      RUN,
      FETCHED,
    );
    expect(entry).toMatchObject({ eventType: 'product.destroyed', subjectId: id });
    expect(entry.eventId.length).toBeLessThanOrEqual(255);
  });

  it("given an id the log cannot hold at all (over 255 characters), then it throws the parser's rejection", () => {
    expect(() => reconcileEntry(created('y'.repeat(256)), RUN, FETCHED)).toThrow(DeliveryRejection);
  });
});

describe('eventIdPart', () => {
  it('keeps ids of up to 64 storable characters, and hashes longer or unstorable ones', () => {
    expect(eventIdPart('a'.repeat(64))).toBe('a'.repeat(64));
    expect(eventIdPart('a'.repeat(65))).toMatch(/^sha256-[0-9a-f]{32}$/);
    expect(eventIdPart('a\u0000b')).toMatch(/^sha256-[0-9a-f]{32}$/);
    expect(eventIdPart('a\ud800b')).toMatch(/^sha256-[0-9a-f]{32}$/);
    expect(eventIdPart('a'.repeat(65))).not.toBe(eventIdPart('a'.repeat(66)));
  });
});
