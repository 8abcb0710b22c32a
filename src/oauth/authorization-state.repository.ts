import { createHash } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { SecretCipher } from '../common/secret-cipher.js';

/** A pending authorization request, once consumed: what the code exchange needs. */
export interface PendingAuthorization {
  codeVerifier: string;
  redirectUri: string;
  /** The principal that started the request (`/auth/connect`), when known: it made the connection. */
  startedBy: StartedBy | null;
}

/** A principal as the audit log names it: never a secret. */
export interface StartedBy {
  id: string;
  name: string;
}

interface AuthorizationRow {
  state_hash: Buffer;
  code_verifier: Buffer;
  redirect_uri: string;
  started_by_id: string | null;
  started_by_name: string | null;
}

const RETURNED = 'state_hash, code_verifier, redirect_uri, started_by_id, started_by_name';

/** Only the SHA-256 of a state is stored: a copy of the table cannot answer a callback. */
export function hashState(state: string): Buffer {
  return createHash('sha256').update(state, 'utf8').digest();
}

const aad = (stateHash: Buffer) => `authorization:${stateHash.toString('hex')}`;

/**
 * The authorization requests of the connect flow (docs/reference.md §6): each state answers one callback,
 * once, before it expires. Consuming is one conditional UPDATE, so two callbacks racing with the
 * same state cannot both win.
 */
@Injectable()
export class AuthorizationStateRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly cipher: SecretCipher,
  ) {}

  async create(
    stateHash: Buffer,
    codeVerifier: string,
    redirectUri: string,
    ttlSeconds: number,
    startedBy: StartedBy | null = null,
  ): Promise<void> {
    await this.dataSource.query(
      `INSERT INTO oauth_authorizations (state_hash, code_verifier, redirect_uri, expires_at, started_by_id, started_by_name)
       VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5, $6)`,
      [
        stateHash,
        this.cipher.seal(codeVerifier, aad(stateHash)),
        redirectUri,
        ttlSeconds,
        startedBy?.id ?? null,
        startedBy?.name ?? null,
      ],
    );
  }

  /** Marks the request used and returns it, or null when it is unknown, already used or expired. */
  async consume(stateHash: Buffer): Promise<PendingAuthorization | null> {
    const [rows]: [AuthorizationRow[], number] = await this.dataSource.query(
      `UPDATE oauth_authorizations SET used_at = now()
       WHERE state_hash = $1 AND used_at IS NULL AND expires_at > now()
       RETURNING ${RETURNED}`,
      [stateHash],
    );
    return rows.length === 0 ? null : this.toPending(rows[0]);
  }

  /** Consumes the newest unused, unexpired request made for `redirectUri` (the out-of-band flow, which has no state). */
  async consumeNewest(redirectUri: string): Promise<PendingAuthorization | null> {
    const [rows]: [AuthorizationRow[], number] = await this.dataSource.query(
      `UPDATE oauth_authorizations SET used_at = now()
       WHERE state_hash = (
           SELECT state_hash FROM oauth_authorizations
           WHERE redirect_uri = $1 AND used_at IS NULL AND expires_at > now()
           ORDER BY created_at DESC LIMIT 1
           FOR UPDATE SKIP LOCKED)
         AND used_at IS NULL AND expires_at > now()
       RETURNING ${RETURNED}`,
      [redirectUri],
    );
    return rows.length === 0 ? null : this.toPending(rows[0]);
  }

  /** Forgets requests that can no longer be answered (an unknown and an expired state are refused alike). */
  async prune(): Promise<void> {
    await this.dataSource.query(`DELETE FROM oauth_authorizations WHERE expires_at < now()`);
  }

  private toPending(row: AuthorizationRow): PendingAuthorization {
    return {
      codeVerifier: this.cipher.open(row.code_verifier, aad(row.state_hash)),
      redirectUri: row.redirect_uri,
      startedBy:
        row.started_by_id === null ? null : { id: row.started_by_id, name: row.started_by_name ?? row.started_by_id },
    };
  }
}
