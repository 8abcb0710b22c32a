import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../common/app-error.js';
import type { ConnectResult } from './connect.service.js';

/** The console page that tells a browser what its connect did. */
export const CONNECT_RESULT_PAGE = '/console/#/connected';

/**
 * Answers `/auth/callback`: an API client (`Accept: application/json`, or anything that does not
 * prefer HTML) gets the connection as JSON, a refusal as problem+json; a browser is sent to the
 * console page with the outcome, the connection's id and the problem's code in the URL, never a
 * token or the state.
 */
export async function answerCallback(
  result: Promise<ConnectResult>,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  reply.header('Cache-Control', 'no-store');
  if (!prefersHtml(request.headers.accept)) {
    const { connection, outcome, retired } = await result;
    await reply.send({ data: connection, meta: { outcome, retired } });
    return;
  }
  let location: string;
  try {
    location = resultPage(await result);
  } catch (error) {
    // Anything else is a fault of ours: the global filter answers it, as for an API client.
    if (!(error instanceof AppError)) throw error;
    location = failurePage(error);
  }
  await reply.redirect(location, 303);
}

function resultPage({ outcome, connection, retired, at }: ConnectResult): string {
  const query = new URLSearchParams({ outcome, connection: String(connection.id), at });
  if (retired.length > 0) query.set('retired', retired.map((item) => item.id).join(','));
  const endpoints = retired.flatMap((item) => item.upstream_endpoints);
  if (endpoints.length > 0) query.set('stale_endpoints', endpoints.join(','));
  return `${CONNECT_RESULT_PAGE}?${query}`;
}

/** The problem's fixed texts only: a detail never quotes the callback's input, bar a checked OAuth error code. */
function failurePage(error: AppError): string {
  const query = new URLSearchParams({
    outcome: 'failed',
    status: String(error.status),
    problem: error.code,
    detail: error.detail,
  });
  return `${CONNECT_RESULT_PAGE}?${query}`;
}

/**
 * Whether the client prefers `text/html` to JSON (RFC 9110 §12.5.1, by q-value; a tie is JSON's,
 * so `*\/*` and no Accept at all get JSON as before). A browser's navigation sends
 * `text/html,…,*\/*;q=0.8`.
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  const ranges = accept.split(',').map((part) => {
    const [range, ...parameters] = part.split(';').map((piece) => piece.trim().toLowerCase());
    const q = parameters.find((parameter) => parameter.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    return { range, weight: Number.isFinite(weight) ? weight : 0 };
  });
  const weightOf = (type: string) => {
    const [major] = type.split('/');
    const exact = ranges.find((item) => item.range === type);
    const wildcard = ranges.find((item) => item.range === `${major}/*`) ?? ranges.find((item) => item.range === '*/*');
    return (exact ?? wildcard)?.weight ?? 0;
  };
  const html = weightOf('text/html');
  return html > 0 && html > weightOf('application/json');
}
