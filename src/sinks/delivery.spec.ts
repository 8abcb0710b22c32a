import { batchWebhookId, newestPerResource } from './delivery.js';
import { changeSubject } from './nats/nats-sink.client.js';
import { stateAfterFailure } from './sink.js';

describe('a batch', () => {
  it('keeps only the newest change of each resource, in seq order', () => {
    const changes = [
      { seq: 1, type: 'product', id: '1' },
      { seq: 2, type: 'product', id: '2' },
      { seq: 3, type: 'product', id: '1' },
      { seq: 4, type: 'collection', id: '1' },
      { seq: 5, type: 'product', id: '2' },
    ];
    expect(newestPerResource(changes).map((change) => change.seq)).toEqual([3, 4, 5]);
  });

  it('has a webhook-id that depends only on the sink, its replay epoch and the batch range', () => {
    const after = { transactionId: '10', seq: '5' };
    const last = { transactionId: '12', seq: '105' };
    const id = batchWebhookId('sink-a', 0, after, last);
    expect(id).toMatch(/^msg_[A-Za-z0-9_-]{32}$/);
    expect(batchWebhookId('sink-a', 0, { ...after }, { ...last })).toBe(id);
    expect(
      new Set([
        id,
        batchWebhookId('sink-b', 0, after, last),
        batchWebhookId('sink-a', 1, after, last),
        batchWebhookId('sink-a', 0, after, { transactionId: '12', seq: '106' }),
        batchWebhookId('sink-a', 0, { transactionId: '10', seq: '6' }, last),
      ]).size,
    ).toBe(5);
  });
});

describe('the NATS subject', () => {
  it('is <prefix>.<owner_id>.<type>.<id>, with characters NATS reserves replaced', () => {
    expect(changeSubject('menu', { ownerId: '42', type: 'product', id: '7' })).toBe('menu.42.product.7');
    expect(changeSubject('a.b', { ownerId: null, type: 'product', id: 'x.y*z> w' })).toBe('a.b._.product.x_y_z__w');
  });
});

describe('the state after a failure', () => {
  it('is retrying until the failures have lasted SINK_FAILING_AFTER, then failing', () => {
    const since = new Date('2026-01-01T00:00:00Z');
    expect(stateAfterFailure(since, new Date('2026-01-03T23:59:59Z'), 72 * 3600_000)).toBe('retrying');
    expect(stateAfterFailure(since, new Date('2026-01-04T00:00:00Z'), 72 * 3600_000)).toBe('failing');
  });
});
