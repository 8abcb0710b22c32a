import { Logger } from '@nestjs/common';
import type { FastifyInstance } from 'fastify';
import { sendProblem } from '../common/problem-details.filter.js';
import { DeliveriesInFlight } from './deliveries-in-flight.js';
import { IngressService } from './ingress.service.js';

const logger = new Logger('IngressRoute');

/**
 * `POST /webhooks/{key}` as a plain Fastify route: it is the hot path (thousands of deliveries a
 * second), and Nest's per-request pipeline (guards, interceptors, pipes, filter lookup) cost about
 * a tenth of the daemon's CPU there. The handler stays one call to IngressService, counted in
 * `inFlight` while it runs.
 */
export function registerIngressRoute(
  fastify: FastifyInstance,
  ingress: IngressService,
  inFlight: DeliveriesInFlight,
): void {
  fastify.post<{ Params: { key: string } }>('/webhooks/:key', async (request, reply) => {
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
