import type { SpecEventName } from '../domain/event-names.js';

/** A JSON:API resource object, as the platform sends it in `included` and API documents. */
export interface ResourceObject {
  id: string;
  type: string;
  attributes: Record<string, unknown>;
  relationships?: Record<string, unknown>;
}

/** One event the platform produced: everything of the delivered body except the callback URI. */
export interface PlatformEvent {
  /** `data.id`: the string form of `seq`. */
  id: string;
  /** `data.attributes.id`: increasing across the emulator's life. */
  seq: number;
  /** Counts events from 0 since the emulator started: fault decisions derive from it, not from ids. */
  ordinal: number;
  eventType: SpecEventName;
  /** `data.attributes.created_at`, ISO 8601 with milliseconds. */
  createdAt: string;
  /** The user owning the resource: subscriptions receive only their own user's events. */
  ownerId: string;
  subject: { id: string; type: string };
  included: ResourceObject[];
}

/** The spec's webhook event body for one callback URI (spec: "Webhook event (the delivered body)"). */
export function webhookBody(event: PlatformEvent, uri: string): Record<string, unknown> {
  return {
    data: {
      id: event.id,
      type: 'webhook_event',
      attributes: { id: event.seq, created_at: event.createdAt, event_type: event.eventType, uri },
      relationships: {
        subject: { data: { id: event.subject.id, type: event.subject.type } },
        resource_owner: { data: { id: event.ownerId, type: 'user' } },
      },
    },
    included: event.included,
  };
}

/** Where produced events go: the delivery service subscribes here. */
export const EVENT_SINK = Symbol('EVENT_SINK');

export interface EventSink {
  publish(event: PlatformEvent): void;
}

/** Who an access token speaks for: what API handlers need to know about the caller. */
export interface Principal {
  userId: string;
  clientId: string;
  scopes: string[];
}
