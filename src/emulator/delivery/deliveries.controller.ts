import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { controlError } from '../emulator-http.error.js';
import { FaultSettings } from '../fault-settings.js';
import type { PlatformEvent } from '../platform-event.js';
import { DeliveryService } from './delivery.service.js';
import { SubscriptionRegistry } from './subscription.registry.js';
import type { WebhookEndpoint } from './subscription.registry.js';

/** The control API of delivery (docs/reference.md §9): attempts, resends, produced events, faults and subscriptions. */
@Controller('_emulator')
export class DeliveriesController {
  constructor(
    private readonly deliveries: DeliveryService,
    private readonly registry: SubscriptionRegistry,
    private readonly faults: FaultSettings,
  ) {}

  @Get('deliveries')
  list() {
    return { data: this.deliveries.attempts(), pending: this.deliveries.pending() };
  }

  @Post('deliveries/resend')
  @HttpCode(202)
  resend(@Body() body: unknown) {
    const eventId = eventIdOf(body);
    if (!this.deliveries.hasEvent(eventId)) throw controlError(404, `no event ${eventId} was published`, 'event_id');
    return { deliveries: this.deliveries.resend(eventId) };
  }

  @Get('events')
  events() {
    return { data: this.deliveries.events().map(eventSummary) };
  }

  @Get('faults')
  currentFaults() {
    return this.faults.current;
  }

  @Post('faults')
  @HttpCode(200)
  replaceFaults(@Body() body: unknown) {
    return this.faults.replace(body);
  }

  @Get('webhook_endpoints')
  endpoints() {
    return { data: this.registry.list().map(endpointJson) };
  }

  @Delete('webhook_endpoints/:id')
  @HttpCode(204)
  removeEndpoint(@Param('id') id: string): void {
    if (!this.registry.remove(id)) throw controlError(404, `no webhook endpoint ${id}`);
  }
}

function eventIdOf(body: unknown): string {
  const eventId = (body as { event_id?: unknown } | null)?.event_id;
  if (typeof eventId === 'string' && eventId !== '') return eventId;
  if (typeof eventId === 'number' && Number.isInteger(eventId)) return String(eventId);
  throw controlError(422, 'event_id must name a published event', 'event_id');
}

function eventSummary(event: PlatformEvent) {
  return {
    event_id: event.id,
    event_type: event.eventType,
    subject: event.subject,
    owner_id: event.ownerId,
    created_at: event.createdAt,
  };
}

function endpointJson(endpoint: WebhookEndpoint) {
  return {
    id: endpoint.id,
    owner_id: endpoint.ownerId,
    callback_uri: endpoint.callbackUri,
    enabled_events: endpoint.enabledEvents,
    created_at: endpoint.createdAt,
    request: endpoint.request,
  };
}
