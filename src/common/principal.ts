import type { FastifyRequest } from 'fastify';
import type { ApiRole } from '../config/app-config.js';

/** Who a request of the API is, as its token says (docs/reference.md §12): what it may do and see. */
export interface Principal {
  /** `read` may only read; `admin` may do everything. */
  role: ApiRole;
  /** The owners whose data it may see; null: every owner. */
  ownerIds: readonly string[] | null;
  /** How the audit log names it, never by its secret: `api_tokens:1` (an entry's position), `loopback`, or a stored token's id. */
  id: string;
  name: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by ApiTokenGuard once it has checked the token. */
    principal?: Principal;
  }
}

/** The principal ApiTokenGuard found for `request`; throws when the guard has not run (a wiring error). */
export function principalOf(request: FastifyRequest): Principal {
  if (request.principal === undefined) throw new Error('ApiTokenGuard did not run for this request');
  return request.principal;
}
