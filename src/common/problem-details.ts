/** RFC 9457 problem details, with optional extension members (e.g. `field`). */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

const STATUS_TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  408: 'Request Timeout',
  409: 'Conflict',
  410: 'Gone',
  413: 'Content Too Large',
  414: 'URI Too Long',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

export function problem(
  status: number,
  detail: string,
  code?: string,
  extra: Record<string, unknown> = {},
): ProblemDetails {
  const title = STATUS_TITLES[status] ?? 'Error';
  const slug = (code ?? title).toLowerCase().replace(/[^a-z]+/g, '-');
  return { type: `urn:menu-sync:problem:${slug}`, title, status, detail, ...extra };
}
