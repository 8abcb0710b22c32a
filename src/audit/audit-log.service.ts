import { Injectable, Logger } from '@nestjs/common';
import { BadRequestError } from '../common/app-error.js';
import type { Principal } from '../common/principal.js';
import { AppConfig } from '../config/app-config.js';
import type { AuditActor } from './audit-actor.js';
import { AuditRepository } from './audit.repository.js';

/**
 * What a write records. `target` names what changed by its id (a sink's id, a connection's, a
 * token's, a projection's name), and `detail` holds ids and outcomes only: never a secret, a URL
 * or anything a client sent as is.
 */
export type AuditRecord = (
  | { actor: AuditActor; principal?: never }
  | { principal: Pick<Principal, 'id' | 'name'>; remoteAddress: string | null; actor?: never }
) & {
  /** `<what>.<past participle>`: `sink.created`, `token.revoked`, `connection.created` … */
  action: string;
  target: string;
  detail?: Record<string, unknown>;
};

/** An entry of `GET /api/v1/audit`. */
export interface AuditEntryView {
  at: string;
  token: { id: string; name: string };
  action: string;
  target: string;
  remote_address: string | null;
}

/** `before` cursors: base64url of `e<entry id>`. */
const encodeBefore = (id: string) => Buffer.from(`e${id}`, 'utf8').toString('base64url');
function decodeBefore(cursor: string): string {
  const match = /^e([1-9][0-9]{0,18})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!/^[A-Za-z0-9_-]{1,32}$/.test(cursor) || !match || BigInt(match[1]) > 9223372036854775807n)
    throw new BadRequestError('before must be a next_cursor given out by this endpoint', 'before');
  return match[1];
}

/**
 * The audit log (docs/reference.md §12): one entry per write of the API or the CLI that changed
 * something, none for a read. A write records once it has happened, in one line:
 *
 *   await this.audit.record({ actor, action: 'sink.created', target: sink.id });
 *
 * with `actor` from `@Actor()` on the handler (or `actorOf(request)`, `cliActor()`), or as
 * `{ principal: principalOf(request), remoteAddress: request.ip, action, target }`. An entry that
 * cannot be written is logged and the write's answer stands: it has happened.
 */
@Injectable()
export class AuditLog {
  private readonly logger = new Logger(AuditLog.name);

  constructor(
    private readonly repository: AuditRepository,
    private readonly config: AppConfig,
  ) {}

  async record(entry: AuditRecord): Promise<void> {
    const who = entry.actor ?? { ...entry.principal, remoteAddress: entry.remoteAddress };
    try {
      await this.repository.insert({
        actorId: who.id,
        actorName: who.name,
        action: entry.action,
        target: entry.target,
        remoteAddress: who.remoteAddress,
        detail: entry.detail ?? null,
      });
    } catch (error) {
      this.logger.error({
        msg: 'an audit entry could not be recorded',
        action: entry.action,
        target: entry.target,
        actor: who.id,
        err: String(error),
      });
    }
  }

  /** A page of entries, newest first; those past AUDIT_RETENTION are not shown even before the pruning deletes them. */
  async page(query: {
    limit: number;
    before?: string;
  }): Promise<{ data: AuditEntryView[]; next_cursor: string | null }> {
    const before = query.before === undefined ? undefined : decodeBefore(query.before);
    const rows = await this.repository.page(query.limit, before, new Date(Date.now() - this.config.auditRetentionMs));
    const data = rows.slice(0, query.limit);
    return {
      data: data.map((row) => ({
        at: row.at.toISOString(),
        token: { id: row.actor_id, name: row.actor_name },
        action: row.action,
        target: row.target,
        remote_address: row.remote_address,
      })),
      next_cursor: rows.length > query.limit ? encodeBefore(data[data.length - 1].id) : null,
    };
  }
}
