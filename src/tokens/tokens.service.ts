import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { AuditActor } from '../audit/audit-actor.js';
import { AuditLog } from '../audit/audit-log.service.js';
import { BadRequestError } from '../common/app-error.js';
import type { ApiRole } from '../config/app-config.js';
import { ApiTokenRecord, ApiTokenRepository, TokenPageKey } from './api-token.repository.js';
import { newTokenSecret, tokenDigest } from './token-secret.js';
import { CreateTokenDto, ListTokensQuery, TOKEN_AFTER_MESSAGE } from './tokens.dto.js';
import { AmbiguousTokenIdError, TokenNotFoundError } from './tokens.errors.js';

/** A stored token as answers show it: never its secret (but in its creation's answer) nor its digest. */
export interface TokenView {
  id: string;
  name: string;
  role: ApiRole;
  owner_ids: string[] | null;
  expires_at: string | null;
  created_at: string;
  last_used_at: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

const view = (token: ApiTokenRecord): TokenView => ({
  id: token.id,
  name: token.name,
  role: token.role,
  owner_ids: token.ownerIds,
  expires_at: token.expiresAt?.toISOString() ?? null,
  created_at: token.createdAt.toISOString(),
  last_used_at: token.lastUsedAt?.toISOString() ?? null,
});

const encodeKey = (token: ApiTokenRecord) => Buffer.from(`${token.createdKey} ${token.id}`).toString('base64url');

function decodeKey(cursor: string): TokenPageKey {
  const [createdAt, id, ...rest] = Buffer.from(cursor, 'base64url').toString('utf8').split(' ');
  if (rest.length > 0 || !INSTANT.test(createdAt ?? '') || !UUID.test(id ?? ''))
    throw new BadRequestError(TOKEN_AFTER_MESSAGE, 'after');
  return { createdAt, id };
}

/** Tokens kept in the database (docs/reference.md §12), for the API and the CLI. */
@Injectable()
export class TokensService {
  constructor(
    private readonly repository: ApiTokenRepository,
    private readonly audit: AuditLog,
  ) {}

  /** Makes a token; its secret is in this answer only (what is kept is its digest). */
  async create(dto: CreateTokenDto, actor: AuditActor, now = new Date()): Promise<TokenView & { token: string }> {
    const expiresAt = dto.expires_at === undefined ? null : new Date(dto.expires_at);
    if (expiresAt !== null && expiresAt.getTime() <= now.getTime())
      throw new BadRequestError('expires_at must be in the future', 'expires_at');
    const secret = newTokenSecret();
    const token = await this.repository.insert({
      id: randomUUID(),
      name: dto.name,
      role: dto.role,
      ownerIds: dto.role === 'read' && dto.owner_ids !== undefined ? dto.owner_ids : null,
      digest: tokenDigest(secret),
      expiresAt,
    });
    await this.audit.record({ actor, action: 'token.created', target: token.id, detail: { role: token.role } });
    return { ...view(token), token: secret };
  }

  async list(query: ListTokensQuery): Promise<{ data: TokenView[]; next_cursor: string | null }> {
    const rows = await this.repository.page(
      query.limit + 1,
      query.after === undefined ? undefined : decodeKey(query.after),
    );
    const page = rows.slice(0, query.limit);
    return {
      data: page.map(view),
      next_cursor: rows.length > query.limit ? encodeKey(page[page.length - 1]) : null,
    };
  }

  /** Every stored token, oldest first (the CLI's `tokens list`). */
  async all(): Promise<TokenView[]> {
    const tokens: TokenView[] = [];
    let after: string | undefined;
    do {
      const page = await this.list(Object.assign(new ListTokensQuery(), { limit: 1000, after }));
      tokens.push(...page.data);
      after = page.next_cursor ?? undefined;
    } while (after !== undefined);
    return tokens;
  }

  /** Removes the token: every process refuses it within seconds. */
  async revoke(id: string, actor: AuditActor): Promise<void> {
    if (!UUID.test(id) || !(await this.repository.remove(id))) throw new TokenNotFoundError(id);
    await this.audit.record({ actor, action: 'token.revoked', target: id });
  }

  /** The CLI's `tokens revoke`: the one token whose id starts with `prefix`; returns its id. */
  async revokeByPrefix(prefix: string, actor: AuditActor): Promise<string> {
    const wanted = prefix.toLowerCase();
    if (!/^[0-9a-f-]{1,36}$/.test(wanted)) throw new TokenNotFoundError(prefix);
    const ids = await this.repository.idsStartingWith(wanted);
    if (ids.length > 1) throw new AmbiguousTokenIdError(prefix);
    if (ids.length === 0) throw new TokenNotFoundError(prefix);
    await this.revoke(ids[0], actor);
    return ids[0];
  }
}
