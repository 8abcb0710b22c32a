import { Body, Controller, Header, Headers, HttpCode, Post } from '@nestjs/common';
import type { IncomingHttpHeaders } from 'node:http';
import { isSpecEventName } from '../../domain/event-names.js';
import type { SpecEventName } from '../../domain/event-names.js';
import { apiError } from '../emulator-http.error.js';
import { FaultSettings } from '../fault-settings.js';
import { OAuthServer } from '../oauth/oauth-server.service.js';
import { SubscriptionRegistry } from './subscription.registry.js';
import type { WebhookEndpoint } from './subscription.registry.js';

/** Version 2 of the platform's API, selected with `Accept` (spec: Versioning). */
export const PLATFORM_MEDIA_TYPE = 'application/vnd.service.v2';

/** Spec endpoint 4: `POST /webhook_endpoints` with a form body; checks run 406, 401, then 422, then 403. */
@Controller('webhook_endpoints')
export class WebhookEndpointsController {
  constructor(
    private readonly oauth: OAuthServer,
    private readonly registry: SubscriptionRegistry,
    private readonly faults: FaultSettings,
  ) {}

  @Post()
  @HttpCode(201)
  @Header('Content-Type', 'application/vnd.api+json')
  create(@Headers() headers: IncomingHttpHeaders, @Body() body: unknown) {
    requireMediaType(headers.accept);
    const principal = this.oauth.authenticate(headers.authorization);
    this.failIfInjected();
    const form = parseForm(body);
    for (const scope of scopesFor(form.enabledEvents)) this.oauth.authenticate(headers.authorization, scope);
    const endpoint = this.registry.add({
      ownerId: principal.userId,
      ...form,
      request: { headers: { ...headers }, form: { ...(body as object) } },
    });
    return endpointDocument(endpoint);
  }

  /** The `api_failures` fault covers this endpoint too (docs/reference.md §9). */
  private failIfInjected(): void {
    if (!this.faults.takeApiFailure()) return;
    const status = this.faults.current.api_error_status;
    throw apiError(
      status,
      'Injected failure',
      'the emulator was told to fail this request',
      undefined,
      status === 429 ? { 'Retry-After': '1' } : {},
    );
  }
}

function requireMediaType(accept: string | undefined): void {
  const types = (accept ?? '').split(',').map((range) => range.split(';')[0].trim().toLowerCase());
  if (!types.includes(PLATFORM_MEDIA_TYPE)) {
    throw apiError(406, 'Not Acceptable', `send Accept: ${PLATFORM_MEDIA_TYPE} to select the API version`);
  }
}

/** `enabled_events[]` arrives as a string or an array, under `enabled_events[]` or `enabled_events`. */
function parseForm(body: unknown): { callbackUri: string; enabledEvents: SpecEventName[] } {
  const form = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const callbackUri = form.callback_uri;
  if (typeof callbackUri !== 'string' || !isHttpUri(callbackUri)) {
    throw apiError(422, 'Invalid callback_uri', 'callback_uri must be an absolute http or https URI', '/callback_uri');
  }
  const raw = form['enabled_events[]'] ?? form.enabled_events;
  const names = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).map(String);
  if (names.length === 0)
    throw apiError(422, 'Invalid enabled_events', 'enabled_events[] must name at least one event', '/enabled_events');
  const unknown = names.find((name) => !isSpecEventName(name));
  if (unknown !== undefined)
    throw apiError(422, 'Invalid enabled_events', `unknown event ${unknown}`, '/enabled_events');
  return { callbackUri, enabledEvents: [...new Set(names)] as SpecEventName[] };
}

function isHttpUri(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

/** Order events need `read_orders`, menu events `read_menu`. */
function scopesFor(events: SpecEventName[]): string[] {
  const scopes = new Set(events.map((name) => (name.startsWith('order.') ? 'read_orders' : 'read_menu')));
  return [...scopes].sort();
}

/** The spec does not show this answer: a JSON:API document of the new endpoint is our choice. */
function endpointDocument(endpoint: WebhookEndpoint) {
  return {
    data: {
      id: endpoint.id,
      type: 'webhook_endpoint',
      attributes: {
        callback_uri: endpoint.callbackUri,
        enabled_events: endpoint.enabledEvents,
        created_at: endpoint.createdAt,
      },
    },
  };
}
