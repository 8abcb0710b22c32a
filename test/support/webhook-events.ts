import { randomUUID } from 'node:crypto';

export interface EventOptions {
  eventType?: string;
  eventId?: string;
  seq?: number;
  createdAt?: string;
  subjectType?: string;
  subjectId?: string;
  ownerId?: string;
  attributes?: Record<string, unknown>;
}

let sequence = 1;

/** A webhook event body shaped as the spec's webhook event (JSON:API data + included). */
export function webhookEvent(options: EventOptions = {}): Record<string, unknown> {
  const eventType = options.eventType ?? 'product.updated';
  const subjectType = options.subjectType ?? eventType.split('.')[0];
  const subjectId = options.subjectId ?? String(1000 + (sequence % 500));
  const seq = options.seq ?? sequence++;
  const resource = {
    id: subjectId,
    type: subjectType,
    attributes: {
      id: Number(subjectId),
      title: `Product ${subjectId}`,
      description: 'Toasted sourdough with smashed avocado, chilli flakes and a poached egg.',
      available: true,
      base_cost: { GBP: { cents: 850, format: '£8.50', currency: { iso_code: 'GBP' } } },
      ...options.attributes,
    },
    relationships: {
      traits: { data: [{ id: '7', type: 'trait' }] },
      externally_managed_product_override: { data: null },
    },
  };
  return {
    data: {
      id: options.eventId ?? randomUUID(),
      type: 'webhook_event',
      attributes: {
        id: seq,
        created_at: options.createdAt ?? new Date().toISOString(),
        event_type: eventType,
        uri: 'https://menu-sync.example/webhooks/key',
      },
      relationships: {
        subject: { data: { id: subjectId, type: subjectType } },
        resource_owner: { data: { id: options.ownerId ?? '42', type: 'user' } },
      },
    },
    included: eventType.endsWith('.destroyed') ? [] : [resource],
  };
}

/** A realistic ~3 KB product.updated body, as the ingress benchmark sends. */
export function realisticEvent(options: EventOptions = {}): Record<string, unknown> {
  return webhookEvent({
    ...options,
    attributes: {
      description:
        'Slow-roasted pulled pork shoulder in a brioche bun with house slaw, pickles and smoked chipotle mayo. '.repeat(
          20,
        ),
      ...options.attributes,
    },
  });
}
