import { AppError, ServiceUnavailableError } from '../common/app-error.js';

/**
 * The token endpoint refused a grant with an RFC 6749 §5.2 error (`invalid_grant`,
 * `invalid_client`…): asking again will not help. The description is the server's, with every
 * secret of the request blanked out.
 */
export class OAuthGrantError extends AppError {
  constructor(
    readonly error: string,
    readonly upstreamStatus: number,
    readonly description?: string,
  ) {
    super(
      'oauth_grant_error',
      502,
      'Bad Gateway',
      `the token endpoint refused the grant: ${error} (HTTP ${upstreamStatus})${description ? `: ${description}` : ''}`,
      { error },
    );
  }
}

/** The upstream could not be reached, kept failing (429, 5XX, network, timeout), or answered nonsense: try later. */
export class UpstreamUnavailableError extends ServiceUnavailableError {
  constructor(detail: string, retryAfterSeconds = 30) {
    super(detail, retryAfterSeconds);
  }
}

/** The connection's grant is gone (`invalid_grant`): only the user can reconnect it. No call is made. */
export class ReauthorizationRequiredError extends AppError {
  constructor(
    readonly connectionId: number,
    reason?: string,
  ) {
    super(
      'reauthorization_required',
      409,
      'Conflict',
      `connection ${connectionId} must be authorized again${reason ? ` (${reason})` : ''}`,
      { connection_id: connectionId },
    );
  }
}

/** No upstream application is configured (no UPSTREAM_* and no emulator): no token can be refreshed. */
export class NoUpstreamApplicationError extends AppError {
  constructor(otherAuthUrl?: string) {
    super(
      'upstream_not_configured',
      503,
      'Service Unavailable',
      otherAuthUrl === undefined
        ? 'no upstream is configured: a token cannot be refreshed'
        : `the connection was made with another authorization server (${otherAuthUrl}) than the configured one: its token is not refreshed`,
    );
  }
}

/** A connection id that is not stored. */
export class UnknownConnectionError extends AppError {
  constructor(readonly connectionId: number) {
    super('unknown_connection', 404, 'Not Found', `no connection ${connectionId}`);
  }
}

export class UpstreamNotConfiguredError extends AppError {
  constructor() {
    super(
      'upstream_not_configured',
      503,
      'Service Unavailable',
      'No upstream is configured: set UPSTREAM_AUTH_URL, UPSTREAM_BASE_URL, OAUTH_CLIENT_ID and OAUTH_CLIENT_SECRET.',
    );
  }
}
