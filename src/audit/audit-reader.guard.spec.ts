import type { ExecutionContext } from '@nestjs/common';
import { ForbiddenError } from '../common/app-error.js';
import type { Principal } from '../common/principal.js';
import { AuditReaderGuard } from './audit-reader.guard.js';

const contextOf = (principal: Principal) =>
  ({ switchToHttp: () => ({ getRequest: () => ({ principal }) }) }) as unknown as ExecutionContext;
const token = (role: Principal['role'], ownerIds: string[] | null): Principal => ({
  role,
  ownerIds,
  id: 'tok_1',
  name: 'a token',
});

describe('AuditReaderGuard', () => {
  const guard = new AuditReaderGuard();

  it('lets an unscoped admin token read the audit log', () => {
    expect(guard.canActivate(contextOf(token('admin', null)))).toBe(true);
  });

  it('refuses a read token and a token scoped to owners with 403', () => {
    for (const principal of [token('read', null), token('read', ['o1']), token('admin', ['o1'])]) {
      expect(() => guard.canActivate(contextOf(principal))).toThrow(ForbiddenError);
    }
  });
});
