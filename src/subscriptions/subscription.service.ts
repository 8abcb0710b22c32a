import { randomBytes } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { ConnectionNotFoundError } from '../connections/connections.errors.js';
import { UpstreamNotConfiguredError } from '../upstream/upstream.errors.js';
import { ConnectionRepository } from '../connections/connection.repository.js';
import { hashWebhookKey, WebhookKeyRegistry } from '../ingress/webhook-key.registry.js';
import { WebhookKeyRepository } from '../ingress/webhook-key.repository.js';
import { UpstreamClient } from '../upstream/upstream-client.js';
import { Subscription, SubscriptionRepository } from './subscription.repository.js';
import { UPSTREAM_SETTINGS } from '../upstream/upstream-settings.js';
import type { UpstreamSettings } from '../upstream/upstream-settings.js';
import { REDACTED } from '../observability/redacted.js';

const MAX_ERROR_CHARS = 500;
/** After a new endpoint is registered, the connection's older webhook keys keep working this long. */
const KEY_ROTATION_OVERLAP_SECONDS = 24 * 3600;

interface Registration {
  upstreamId: string | null;
  error: string | null;
  /** The upstream answered that it did not create the endpoint: its key will never be used. */
  refused: boolean;
}

/**
 * Webhook subscriptions (docs/reference.md §7, spec endpoint 4): each registration gets a fresh key of
 * 256 bits, stored only as a hash and accepted before the upstream is asked, so that a delivery
 * made while the registration is still being answered is not refused. Neither the key nor the
 * callback URI carrying it is logged or stored in clear.
 */
@Injectable()
export class SubscriptionService {
  private readonly logger = new Logger(SubscriptionService.name);

  constructor(
    @Inject(UPSTREAM_SETTINGS) private readonly settings: UpstreamSettings | null,
    private readonly upstream: UpstreamClient,
    private readonly connections: ConnectionRepository,
    private readonly keys: WebhookKeyRepository,
    private readonly registry: WebhookKeyRegistry,
    private readonly subscriptions: SubscriptionRepository,
  ) {}

  /** Registers a new webhook endpoint for the connection; a failure is recorded (status `failed`), not thrown. */
  async subscribe(connectionId: number): Promise<Subscription> {
    if (this.settings === null) throw new UpstreamNotConfiguredError();
    const { publicUrl, enabledEvents } = this.settings;
    if ((await this.connections.find(connectionId)) === null) throw new ConnectionNotFoundError(connectionId);
    const key = randomBytes(32).toString('base64url');
    const keyHash = hashWebhookKey(key);
    const keyId = await this.keys.add(keyHash, connectionId);
    this.registry.learn(keyHash, keyId);
    const form = new URLSearchParams({ callback_uri: `${publicUrl}/webhooks/${key}` });
    for (const event of enabledEvents) form.append('enabled_events[]', event);
    const registration = await this.register(connectionId, form, key);
    if (registration.refused) {
      await this.keys.expire(keyId);
      this.registry.forget(keyHash);
    } else if (registration.error === null) {
      // The upstream shows no way to delete an endpoint: the older ones keep delivering to their keys until these expire.
      const rotated = await this.keys.expireOthers(connectionId, keyId, KEY_ROTATION_OVERLAP_SECONDS);
      if (rotated > 0)
        this.logger.log({
          msg: `connection ${connectionId}: ${rotated} older webhook key(s) expire in ${KEY_ROTATION_OVERLAP_SECONDS / 3600} h`,
          connectionId,
        });
    }
    const subscription = await this.subscriptions.create({
      connectionId,
      webhookKeyId: keyId,
      callbackUri: `${publicUrl}/webhooks/${REDACTED}`,
      enabledEvents: [...enabledEvents],
      upstreamId: registration.upstreamId,
      status: registration.error === null ? 'registered' : 'failed',
      lastError: registration.error,
    });
    const fields = {
      connectionId,
      subscriptionId: subscription.id,
      upstreamId: subscription.upstreamId,
      events: enabledEvents.length,
    };
    if (registration.error === null)
      this.logger.log({ msg: `webhook endpoint registered for connection ${connectionId}`, ...fields });
    else
      this.logger.warn({
        msg: `webhook endpoint registration failed for connection ${connectionId}`,
        ...fields,
        error: registration.error,
      });
    return subscription;
  }

  /**
   * Retires a connection another one of its owner replaces: its webhook keys stop being accepted
   * now, and it is forgotten with its subscriptions and sealed tokens. The spec shows no way to
   * delete an endpoint upstream: the upstream ids of its endpoints are returned, to be removed
   * where the platform allows it (its dashboard); until then their deliveries answer 404.
   */
  async retire(connectionId: number): Promise<{ upstreamIds: string[] }> {
    const subscriptions = await this.subscriptions.list([connectionId]);
    await this.keys.expireOthers(connectionId, 0, 0);
    await this.registry.refresh();
    await this.connections.withLocked(connectionId, async (_connection, manager) => {
      await this.subscriptions.deleteOf(manager, connectionId);
      await this.connections.delete(manager, connectionId);
    });
    const upstreamIds = subscriptions.flatMap((subscription) =>
      subscription.status === 'registered' && subscription.upstreamId !== null ? [subscription.upstreamId] : [],
    );
    return { upstreamIds };
  }

  private async register(connectionId: number, form: URLSearchParams, key: string): Promise<Registration> {
    try {
      const response = await this.upstream.request(connectionId, {
        method: 'POST',
        path: '/webhook_endpoints',
        form,
        versioned: true,
      });
      if (response.status >= 200 && response.status < 300)
        return { upstreamId: upstreamIdOf(response.json), error: null, refused: false };
      const error = `the upstream answered ${response.status}${describeAnswer(response.json)}`;
      return { upstreamId: null, error: redact(error, key), refused: response.status >= 400 && response.status < 500 };
    } catch (error) {
      return {
        upstreamId: null,
        error: redact(error instanceof Error ? error.message : String(error), key),
        refused: false,
      };
    }
  }
}

/** `data.id` of the answer (the spec does not show it; JSON:API is likely). */
function upstreamIdOf(json: unknown): string | null {
  const id = (json as { data?: { id?: unknown } } | null | undefined)?.data?.id;
  return typeof id === 'string' || typeof id === 'number' ? String(id) : null;
}

/** The first JSON:API error's title and detail, or an OAuth error code. */
function describeAnswer(json: unknown): string {
  const body = json as { errors?: Array<{ title?: unknown; detail?: unknown }>; error?: unknown } | null | undefined;
  const first = body?.errors?.[0];
  const parts = [first?.title, first?.detail, body?.error].filter(
    (part): part is string => typeof part === 'string' && part !== '',
  );
  return parts.length === 0 ? '' : `: ${parts.join(': ')}`;
}

/** An upstream may echo the callback URI: the key must not reach the database or the logs through it. */
function redact(text: string, key: string): string {
  return text.split(key).join(REDACTED).slice(0, MAX_ERROR_CHARS);
}
