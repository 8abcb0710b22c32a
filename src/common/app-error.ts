/**
 * An error with a stable code and an HTTP status, turned into problem+json by ProblemDetailsFilter.
 * Modules throw their own subclasses; anything else becomes a 500 that reveals nothing.
 */
export class AppError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    readonly title: string,
    readonly detail: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(detail);
  }
}

export class BadRequestError extends AppError {
  constructor(detail: string, field?: string) {
    super('bad_request', 400, 'Bad Request', detail, field === undefined ? {} : { field });
  }
}

export class NotFoundError extends AppError {
  constructor(detail: string) {
    super('not_found', 404, 'Not Found', detail);
  }
}

export class UnauthorizedError extends AppError {
  constructor(detail: string) {
    super('unauthorized', 401, 'Unauthorized', detail);
  }
}

export class ForbiddenError extends AppError {
  constructor(detail: string, field?: string) {
    super('forbidden', 403, 'Forbidden', detail, field === undefined ? {} : { field });
  }
}

export class ServiceUnavailableError extends AppError {
  constructor(
    detail: string,
    readonly retryAfterSeconds: number,
  ) {
    super('unavailable', 503, 'Service Unavailable', detail);
  }
}
