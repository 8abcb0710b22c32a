import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { ForbiddenError } from '../common/app-error.js';
import { principalOf } from '../common/principal.js';

/**
 * The audit log is for unscoped admin tokens only (docs/reference.md §12): a read token, which the
 * API token guard lets read, and a token scoped to owners are refused. Runs after ApiTokenGuard.
 */
@Injectable()
export class AuditReaderGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const principal = principalOf(context.switchToHttp().getRequest<FastifyRequest>());
    if (principal.role !== 'admin') throw new ForbiddenError('The audit log is for admin tokens only.');
    if (principal.ownerIds !== null)
      throw new ForbiddenError('The audit log is not for a token scoped to owners (owner_ids).');
    return true;
  }
}
