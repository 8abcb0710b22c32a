import { Injectable } from '@nestjs/common';
import type { SpecEventName } from '../../domain/event-names.js';
import { Clock } from '../clock.js';
import type { PlatformEvent } from '../platform-event.js';

/** One registered webhook endpoint, with the request that created it (for tests to inspect). */
export interface WebhookEndpoint {
  id: string;
  /** The user of the token that registered it: it receives only that user's events. */
  ownerId: string;
  callbackUri: string;
  enabledEvents: SpecEventName[];
  createdAt: string;
  request: { headers: Record<string, unknown>; form: Record<string, unknown> };
}

export type NewWebhookEndpoint = Omit<WebhookEndpoint, 'id' | 'createdAt'>;

/** The webhook endpoints (subscriptions) the emulator delivers to, in registration order. */
@Injectable()
export class SubscriptionRegistry {
  private readonly endpoints = new Map<string, WebhookEndpoint>();
  private lastId = 0;

  constructor(private readonly clock: Clock) {}

  add(input: NewWebhookEndpoint): WebhookEndpoint {
    this.lastId += 1;
    const endpoint: WebhookEndpoint = {
      ...input,
      enabledEvents: [...input.enabledEvents],
      id: String(this.lastId),
      createdAt: this.clock.now().toISOString(),
      request: { headers: redacted(input.request.headers), form: { ...input.request.form } },
    };
    this.endpoints.set(endpoint.id, endpoint);
    return endpoint;
  }

  list(): WebhookEndpoint[] {
    return [...this.endpoints.values()];
  }

  remove(id: string): boolean {
    return this.endpoints.delete(id);
  }

  /** The endpoints of the event's owner that enabled its event name. */
  matching(event: PlatformEvent): WebhookEndpoint[] {
    return this.list().filter(
      (endpoint) => endpoint.ownerId === event.ownerId && endpoint.enabledEvents.includes(event.eventType),
    );
  }
}

/** The recorded request is shown on the control API: the bearer token must not be. */
function redacted(headers: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [
      name,
      name.toLowerCase() === 'authorization' ? '[redacted]' : value,
    ]),
  );
}
