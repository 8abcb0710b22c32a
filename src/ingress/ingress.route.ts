import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Logger } from '@nestjs/common';
import type { FastifyInstance } from 'fastify';
import type { Logger as Pino } from 'pino';
import { problemAnswer, sendProblem } from '../common/problem-details.filter.js';
import { PROBLEM_CONTENT_TYPE } from '../common/problem-details.js';
import { logRequestCompleted, requestContext, requestIdOf } from '../observability/request-context.js';
import { DeliveriesInFlight } from './deliveries-in-flight.js';
import { IngressService } from './ingress.service.js';
import { WebhookKeyRegistry } from './webhook-key.registry.js';

const logger = new Logger('IngressRoute');
const ROUTE = '/webhooks/:key';

/**
 * `POST /webhooks/{key}` as a plain Fastify route: Nest's per-request pipeline (guards,
 * interceptors, pipes, filter lookup) is not worth its cost on the hot path. The handler stays one
 * call to IngressService, counted in `inFlight` while it runs. Most deliveries do not even reach
 * it: see installDirectIngress.
 */
export function registerIngressRoute(
  fastify: FastifyInstance,
  ingress: IngressService,
  inFlight: DeliveriesInFlight,
): void {
  fastify.post<{ Params: { key: string } }>(ROUTE, async (request, reply) => {
    inFlight.begin();
    try {
      const outcome = await ingress.receive({
        key: request.params.key,
        body: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
        contentType: request.headers['content-type'],
        receivedAt: new Date(),
      });
      return reply.status(outcome.status).send(outcome.body);
    } catch (error) {
      return sendProblem(reply, request, error, logger);
    } finally {
      inFlight.end();
    }
  });
}

export interface DirectIngress {
  ingress: IngressService;
  inFlight: DeliveriesInFlight;
  keys: WebhookKeyRegistry;
  maxBodyBytes: number;
  /** The root logger, for the `request completed` line. */
  logger: Pino;
}

/** A path Fastify routes to the webhook route as it is (no decoding, no query), with the key's characters. */
const DIRECT_PATH = /^\/webhooks\/([A-Za-z0-9_~.-]{1,100})$/;
const DIRECT_LENGTH = /^[1-9][0-9]{0,9}$/;
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
const PROBLEM_CONTENT_TYPE_UTF8 = `${PROBLEM_CONTENT_TYPE}; charset=utf-8`;

/**
 * Serves the common delivery straight from node:http, before Fastify: a POST to
 * `/webhooks/<a known key>` with nothing to decode in the path, no query, and a Content-Length
 * within the limit. Fastify's work per request (routing, the hooks of Nest's adapter and ours, the
 * body parser, the reply) would otherwise be a large share of the cost of a delivery. It answers as
 * the route above does: the same service, answers, headers, request id (also in the log lines
 * written meanwhile) and `request completed` line. Everything else (a chunked body, an unknown key,
 * an odd path, a request arriving during shutdown) goes to Fastify, as before.
 */
export function installDirectIngress(server: Server, fastify: FastifyInstance, direct: DirectIngress): void {
  let closing = false;
  fastify.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  const listeners = server.listeners('request') as Array<(request: IncomingMessage, response: ServerResponse) => void>;
  if (listeners.length !== 1) throw new Error(`expected Fastify's one request listener, found ${listeners.length}`);
  const [viaFastify] = listeners;
  server.removeAllListeners('request');
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    if (closing || !serveDirectly(request, response, direct)) viaFastify.call(server, request, response);
  });
}

/** Takes the request if it is one served directly: true when it did. */
function serveDirectly(request: IncomingMessage, response: ServerResponse, direct: DirectIngress): boolean {
  if (request.method !== 'POST') return false;
  const path = DIRECT_PATH.exec(request.url ?? '');
  if (path === null) return false;
  const length = request.headers['content-length'];
  if (
    request.headers['transfer-encoding'] !== undefined ||
    length === undefined ||
    !DIRECT_LENGTH.test(length) ||
    Number(length) > direct.maxBodyBytes
  )
    return false;
  const key = path[1];
  const keyId = direct.keys.resolve(key);
  if (keyId === null) return false;
  const startedAt = performance.now();
  const reqId = requestIdOf(request.headers['x-request-id']);
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  // A client gone before the end of its body gets no answer, as on Fastify's route.
  request.on('error', () => undefined);
  request.on('end', () => {
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    requestContext.run({ reqId }, () => void answer(request, response, direct, { key, keyId, body, reqId, startedAt }));
  });
  return true;
}

async function answer(
  request: IncomingMessage,
  response: ServerResponse,
  direct: DirectIngress,
  delivery: { key: string; keyId: string; body: Buffer; reqId: string; startedAt: number },
): Promise<void> {
  const { reqId } = delivery;
  direct.inFlight.begin();
  try {
    const outcome = await direct.ingress.receiveUnder(delivery.keyId, {
      key: delivery.key,
      body: delivery.body,
      contentType: request.headers['content-type'],
      receivedAt: new Date(),
    });
    send(response, outcome.status, JSON_CONTENT_TYPE, JSON.stringify(outcome.body), reqId);
  } catch (error) {
    const { body, retryAfterSeconds } = problemAnswer(error, { reqId, route: ROUTE }, logger);
    send(response, body.status, PROBLEM_CONTENT_TYPE_UTF8, JSON.stringify(body), reqId, retryAfterSeconds);
  } finally {
    direct.inFlight.end();
  }
  logRequestCompleted(direct.logger, {
    reqId,
    method: request.method,
    route: ROUTE,
    status: response.statusCode,
    ms: performance.now() - delivery.startedAt,
  });
}

function send(
  response: ServerResponse,
  status: number,
  contentType: string,
  text: string,
  reqId: string,
  retryAfterSeconds?: number,
): void {
  const headers: Record<string, string | number> = {
    'content-type': contentType,
    'content-length': Buffer.byteLength(text),
    'x-request-id': reqId,
  };
  if (retryAfterSeconds !== undefined) headers['retry-after'] = String(retryAfterSeconds);
  response.writeHead(status, headers).end(text);
}
