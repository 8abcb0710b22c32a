import { AppError } from '../common/app-error.js';

/** Errors of the connect flow (docs/reference.md §6), answered as problem+json by the global filter. */
export class AuthError extends AppError {}

export class InvalidCallbackError extends AuthError {
  constructor(detail: string, field: string) {
    super('invalid_callback', 400, 'Bad Request', detail, { field });
  }
}

export class InvalidStateError extends AuthError {
  constructor() {
    super(
      'invalid_state',
      400,
      'Bad Request',
      'The state is unknown, already used or expired: nothing was stored. Start again at /auth/connect.',
      { field: 'state' },
    );
  }
}

/** The authorization server redirected back with an `error` (RFC 6749 §4.1.2.1). */
export class AuthorizationDeniedError extends AuthError {
  constructor(error: string) {
    super(
      'authorization_denied',
      400,
      'Bad Request',
      `The authorization server answered ${error}: nothing was stored.`,
      { error },
    );
  }
}

/** The token endpoint refused or could not be reached; carries the OAuth error code only, never a secret. */
export class CodeExchangeError extends AuthError {
  constructor(reason: string) {
    super(
      'code_exchange_failed',
      502,
      'Bad Gateway',
      `The authorization code could not be exchanged: ${reason}. Nothing was stored.`,
    );
  }
}

export class NoPendingAuthorizationError extends AuthError {
  constructor() {
    super(
      'no_pending_authorization',
      400,
      'Bad Request',
      'No unexpired out-of-band authorization is pending: run `menu-sync auth url` first (it is valid for 10 minutes, once).',
    );
  }
}
