import type { FastifyInstance } from 'fastify';
import type { Role } from '../config/app-config.js';
import { problem, PROBLEM_CONTENT_TYPE } from './problem-details.js';

/** How long a client told that this process lacks a role waits before it retries (elsewhere, behind a balancer). */
export const ROLE_RETRY_AFTER_SECONDS = 5;

const under = (path: string, prefix: string) =>
  path === prefix || path.startsWith(`${prefix}/`) || path.startsWith(`${prefix}?`);

/**
 * The role whose process serves a request path: webhooks are ingress's, `/api/v1` and the connect
 * flow (`/auth`) the API's, `/` and `/console` the console's; anything else (health, metrics, the
 * API's documentation) every process serves.
 */
export function roleOfPath(path: string): Role | undefined {
  if (under(path, '/webhooks')) return 'ingress';
  if (under(path, '/api/v1') || under(path, '/auth')) return 'api';
  if (path === '/' || path.startsWith('/?') || under(path, '/console')) return 'console';
  return undefined;
}

/**
 * Answers a request for a role this process does not hold with 503, `Retry-After` and a problem
 * naming the role, never 404: a balancer that routed it here by mistake retries, and a client is
 * told why. Installs nothing when the process holds every role that serves routes.
 */
export function registerRoleGate(fastify: FastifyInstance, held: readonly Role[]): void {
  const missing = new Set<Role>((['ingress', 'api', 'console'] as const).filter((role) => !held.includes(role)));
  if (missing.size === 0) return;
  fastify.addHook('onRequest', (request, reply, done) => {
    const role = roleOfPath(request.url);
    if (role === undefined || !missing.has(role)) return done();
    void reply
      .status(503)
      .headers({ 'Retry-After': String(ROLE_RETRY_AFTER_SECONDS), 'Content-Type': PROBLEM_CONTENT_TYPE })
      .send(
        problem(
          503,
          `This process does not hold the ${role} role (ROLES=${held.join(',')}); send the request to one that does.`,
          'role-not-held',
          { role },
        ),
      );
  });
}
