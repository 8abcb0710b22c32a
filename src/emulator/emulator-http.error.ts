/**
 * An answer the emulator gives on purpose, with the exact body the platform would send: RFC 6749
 * error objects on the OAuth endpoints, JSON:API error documents on the API, problem+json on the
 * control API. EmulatorErrorFilter writes it as is.
 */
export class EmulatorHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly contentType = 'application/json',
    readonly headers: Record<string, string> = {},
  ) {
    super(`emulator answered ${status}`);
  }
}

/** RFC 6749 §5.2 error body. */
export function oauthError(
  status: number,
  error: string,
  description: string,
  headers: Record<string, string> = {},
): EmulatorHttpError {
  return new EmulatorHttpError(status, { error, error_description: description }, 'application/json', {
    'Cache-Control': 'no-store',
    ...headers,
  });
}

/** A JSON:API error document (the platform's API speaks JSON:API). */
export function apiError(
  status: number,
  title: string,
  detail: string,
  pointer?: string,
  headers: Record<string, string> = {},
): EmulatorHttpError {
  const error: Record<string, unknown> = { status: String(status), title, detail };
  if (pointer !== undefined) error.source = { pointer };
  return new EmulatorHttpError(status, { errors: [error] }, 'application/vnd.api+json', headers);
}

/** problem+json for the control API, naming the field at fault. */
export function controlError(status: number, detail: string, field?: string): EmulatorHttpError {
  const titles: Record<number, string> = {
    400: 'Bad Request',
    404: 'Not Found',
    409: 'Conflict',
    422: 'Unprocessable Content',
  };
  const body: Record<string, unknown> = {
    type: `urn:menu-sync:emulator:${(titles[status] ?? 'error').toLowerCase().replace(/[^a-z]+/g, '-')}`,
    title: titles[status] ?? 'Error',
    status,
    detail,
  };
  if (field !== undefined) body.field = field;
  return new EmulatorHttpError(status, body, 'application/problem+json');
}
