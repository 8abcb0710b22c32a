import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BadRequestError } from './app-error.js';
import { problem, PROBLEM_CONTENT_TYPE } from './problem-details.js';
import { toProblem } from './problem-details.filter.js';

/** The longest path or query value (and query name) any route takes, in characters. */
export const MAX_PARAMETER_CHARS = 1024;

/** A UTF-16 code unit that is half of a surrogate pair without its other half. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The one place path and query values are checked before any route sees them: a NUL (which
 * PostgreSQL cannot store in text), a lone surrogate, a `%` sequence that is not UTF-8, or an
 * over-long value is a 400 problem naming the parameter, whatever the route.
 */
export function registerInputChecks(fastify: FastifyInstance): void {
  fastify.addHook('onRequest', (request, reply, done) => {
    const error = findBadInput(request);
    if (error === undefined) return done();
    void reply.status(400).header('Content-Type', PROBLEM_CONTENT_TYPE).send(toProblem(error));
  });
}

export function findBadInput(request: Pick<FastifyRequest, 'params' | 'url'>): BadRequestError | undefined {
  const params = (request.params ?? {}) as Record<string, unknown>;
  for (const [name, value] of Object.entries(params)) {
    if (typeof value !== 'string') continue;
    const fault = faultOf(value);
    // `*` is the not-found route's wildcard: the path itself.
    const field = name === '*' ? 'path' : name;
    if (fault) return new BadRequestError(`path parameter ${field} ${fault}`, field);
  }
  return findBadQuery(request.url);
}

/** Reads the raw query string itself: the parser Fastify uses keeps an undecodable value as it came. */
function findBadQuery(url: string): BadRequestError | undefined {
  const start = url.indexOf('?');
  if (start < 0) return undefined;
  for (const pair of url.slice(start + 1).split('&')) {
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const rawName = equals < 0 ? pair : pair.slice(0, equals);
    const name = decode(rawName);
    if (name === undefined)
      return new BadRequestError('a query parameter name is not valid percent-encoded UTF-8', printable(rawName));
    const field = printable(name);
    const nameFault = faultOf(name);
    if (nameFault) return new BadRequestError(`query parameter name ${nameFault}`, field);
    const value = decode(equals < 0 ? '' : pair.slice(equals + 1));
    if (value === undefined) return new BadRequestError(`${field} is not valid percent-encoded UTF-8`, field);
    const valueFault = faultOf(value);
    if (valueFault) return new BadRequestError(`${field} ${valueFault}`, field);
  }
  return undefined;
}

function faultOf(value: string): string | undefined {
  if (value.length > MAX_PARAMETER_CHARS) return `must be at most ${MAX_PARAMETER_CHARS} characters`;
  if (value.includes('\0')) return 'must not contain a NUL character';
  if (LONE_SURROGATE.test(value)) return 'must not contain a lone surrogate';
  return undefined;
}

function decode(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}

// eslint-disable-next-line no-control-regex -- control characters are exactly what is replaced
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/g;

/** A name fit to echo back: bounded, without control characters or lone surrogates. */
function printable(name: string): string {
  return name.slice(0, 64).replace(CONTROL_CHARACTERS, '\uFFFD').replace(new RegExp(LONE_SURROGATE, 'g'), '\uFFFD');
}

/**
 * Errors the router raises before any hook (a path that is not valid percent-encoding, a path
 * parameter over the router's length limit) as problem+json too.
 */
export function frameworkErrorProblem(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const status =
    typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 400;
  const detail =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? 'A path parameter is too long.'
      : 'The path is not valid percent-encoded UTF-8.';
  void reply
    .status(status)
    .header('Content-Type', PROBLEM_CONTENT_TYPE)
    .send(problem(status, detail, undefined, { field: 'path' }));
}

/**
 * Requests Node's HTTP parser refuses (a NUL or other control character in a header, headers too
 * large, a malformed request line) answered as problem+json, as Fastify's default handler does in JSON.
 */
export function clientErrorProblem(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const status = error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : error.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
  const detail =
    status === 408
      ? 'The request took too long to arrive.'
      : status === 431
        ? 'The request headers are too large.'
        : 'The request is not valid HTTP (a header value or the request line is malformed).';
  const body = JSON.stringify(problem(status, detail));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
