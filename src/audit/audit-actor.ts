import { userInfo } from 'node:os';
import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { principalOf } from '../common/principal.js';

/**
 * Who made a write and from where, as the audit log names them (docs/reference.md §12): a token of
 * the API by its principal's id and name (never its secret), the CLI, or a step of the daemon's own.
 */
export interface AuditActor {
  id: string;
  name: string;
  /** The client's address for a request of the API; null for the CLI and the daemon. */
  remoteAddress: string | null;
}

/** The request's principal (ApiTokenGuard must have run) and its client's address. */
export function actorOf(request: FastifyRequest): AuditActor {
  const { id, name } = principalOf(request);
  return { id, name, remoteAddress: request.ip };
}

/** A handler's parameter: the AuditActor of its request (`@Actor() actor: AuditActor`). */
export const Actor = createParamDecorator((_: unknown, context: ExecutionContext) =>
  actorOf(context.switchToHttp().getRequest<FastifyRequest>()),
);

/** A command of this process's CLI: `cli:<OS user>`, or `cli` when the user has no name. */
export function cliActor(): AuditActor {
  let user: string | undefined;
  try {
    user = userInfo().username;
  } catch {
    user = undefined;
  }
  return user === undefined || user === ''
    ? { id: 'cli', name: 'menu-sync CLI', remoteAddress: null }
    : { id: `cli:${user}`, name: `menu-sync CLI (${user})`, remoteAddress: null };
}

/**
 * The end of the connect flow: `/auth/callback` carries no token, only the state that an admin's
 * `/auth/connect` made, and the state's row does not keep who that was; the address is the browser's.
 */
export function oauthCallbackActor(request: FastifyRequest): AuditActor {
  return { id: 'oauth_callback', name: 'oauth callback', remoteAddress: request.ip };
}

/** The zero-configuration sandbox, which adds its catalogue sink itself at start. */
export const SANDBOX_ACTOR: AuditActor = { id: 'sandbox', name: 'the sandbox', remoteAddress: null };
