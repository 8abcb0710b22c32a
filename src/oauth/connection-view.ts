import type { Subscription } from '../subscriptions/subscription.repository.js';
import { expiresAt } from '../connections/connection.js';
import type { Connection } from '../connections/connection.js';

/** A subscription as the API shows it: the callback URI's key is already redacted in storage. */
export interface SubscriptionView {
  id: number;
  callback_uri: string;
  enabled_events: string[];
  status: string;
  upstream_id: string | null;
  last_error: string | null;
  created_at: string;
}

/** A connection as the API and the CLI show it (docs/reference.md §5): token state, never a token or a key. */
export interface ConnectionView {
  id: number;
  state: string;
  auth_url: string;
  base_url: string;
  scopes: string[];
  owner_id: string | null;
  token: { expires_at: string; last_refresh_at: string | null };
  last_error: string | null;
  subscriptions: SubscriptionView[];
  created_at: string;
  mode: 'configured' | 'emulator';
}

export function subscriptionView(subscription: Subscription): SubscriptionView {
  return {
    id: subscription.id,
    callback_uri: subscription.callbackUri,
    enabled_events: subscription.enabledEvents,
    status: subscription.status,
    upstream_id: subscription.upstreamId,
    last_error: subscription.lastError,
    created_at: subscription.createdAt.toISOString(),
  };
}

/** Built field by field, so that a field added to Connection (a token…) is never shown by accident. */
export function connectionView(
  connection: Connection,
  subscriptions: Subscription[],
  mode: ConnectionView['mode'],
): ConnectionView {
  return {
    id: connection.id,
    state: connection.state,
    auth_url: connection.authUrl,
    base_url: connection.baseUrl,
    scopes: connection.scopes,
    owner_id: connection.ownerId,
    token: {
      expires_at: expiresAt(connection).toISOString(),
      last_refresh_at: connection.lastRefreshAt?.toISOString() ?? null,
    },
    last_error: connection.lastError,
    subscriptions: subscriptions
      .filter((subscription) => subscription.connectionId === connection.id)
      .map(subscriptionView),
    created_at: connection.createdAt.toISOString(),
    mode,
  };
}
