import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { advisoryLocks, lockQuery } from '../database/advisory-locks.js';
import type { Connection, ConnectionState, TokenSet } from './connection.js';
import { SecretCipher } from '../common/secret-cipher.js';

interface ConnectionRow {
  id: string;
  auth_url: string;
  base_url: string;
  scopes: string[];
  state: ConnectionState;
  sandbox: boolean;
  access_token: Buffer;
  refresh_token: Buffer | null;
  token_created_at: Date;
  expires_in: number;
  token_version: number;
  owner_id: string | null;
  last_refresh_at: Date | null;
  last_error: string | null;
  created_at: Date;
}

const aad = (id: number, column: 'access_token' | 'refresh_token') => `connection:${id}:${column}`;

/**
 * Connections with their tokens sealed at rest: only this repository sees ciphertext, and only
 * its callers see tokens. `withLocked` serialises token refreshes across processes by a row lock.
 */
@Injectable()
export class ConnectionRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly cipher: SecretCipher,
  ) {}

  async create(input: {
    authUrl: string;
    baseUrl: string;
    scopes: string[];
    tokens: TokenSet;
    sandbox?: boolean;
  }): Promise<Connection> {
    const [{ id }] = await this.dataSource.query(
      `SELECT nextval(pg_get_serial_sequence('connections', 'id'))::int AS id`,
    );
    const [row] = await this.dataSource.query(
      `INSERT INTO connections (id, auth_url, base_url, scopes, access_token, refresh_token, token_created_at, expires_in, owner_id, sandbox)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *`,
      [
        id,
        input.authUrl,
        input.baseUrl,
        input.tokens.scopes ?? input.scopes,
        ...this.sealTokens(id, input.tokens),
        input.tokens.createdAt,
        input.tokens.expiresIn,
        input.tokens.ownerId ?? null,
        input.sandbox ?? false,
      ],
    );
    return this.toConnection(row);
  }

  async find(id: number, manager: EntityManager = this.dataSource.manager): Promise<Connection | null> {
    const [row] = await manager.query(`SELECT * FROM connections WHERE id = $1`, [id]);
    return row === undefined ? null : this.toConnection(row);
  }

  /** The connections made with this upstream for `ownerId`, oldest first. */
  async ofOwner(authUrl: string, baseUrl: string, ownerId: string): Promise<Connection[]> {
    const rows: ConnectionRow[] = await this.dataSource.query(
      `SELECT * FROM connections WHERE auth_url = $1 AND base_url = $2 AND owner_id = $3 ORDER BY id`,
      [authUrl, baseUrl, ownerId],
    );
    return rows.map((row) => this.toConnection(row));
  }

  /**
   * Runs `fn` holding the database's connect lock: two connects of one owner, in one process or
   * two, cannot both find no connection and make one each. Like `withLocked`, the lock's
   * transaction writes nothing, so it holds no xid while `fn` calls the upstream.
   */
  async whileConnecting<T>(fn: () => Promise<T>): Promise<T> {
    return this.dataSource.transaction(async (manager) => {
      await manager.query(...lockQuery('pg_advisory_xact_lock', advisoryLocks.single('connect')));
      return fn();
    });
  }

  async list(): Promise<Connection[]> {
    const rows: ConnectionRow[] = await this.dataSource.query(`SELECT * FROM connections ORDER BY id`);
    return rows.map((row) => this.toConnection(row));
  }

  /**
   * Runs `fn` in a transaction holding the connection's lock (another process refreshing the same
   * connection waits here), with the connection as it is once the lock is held. The lock is an
   * advisory one, not a row lock: a row lock would give the transaction an xid for the whole
   * refresh call, holding every gap-safe log reader back (see `event_log_horizon()`); this way the
   * xid exists only for `saveTokens` at the end.
   */
  async withLocked<T>(id: number, fn: (connection: Connection, manager: EntityManager) => Promise<T>): Promise<T> {
    return this.dataSource.transaction(async (manager) => {
      await manager.query(...lockQuery('pg_advisory_xact_lock', advisoryLocks.inSpace('connectionRefresh', id)));
      const [row] = await manager.query(`SELECT * FROM connections WHERE id = $1`, [id]);
      if (row === undefined) throw new Error(`no connection ${id}`);
      return fn(this.toConnection(row), manager);
    });
  }

  /** Stores refreshed tokens; a refresh answer without a refresh token keeps the old one. */
  async saveTokens(manager: EntityManager, id: number, tokens: TokenSet): Promise<Connection> {
    const [access, refresh] = this.sealTokens(id, tokens);
    const [[row]] = await manager.query(
      `UPDATE connections SET access_token = $2, refresh_token = COALESCE($3, refresh_token), token_created_at = $4,
         expires_in = $5, scopes = COALESCE($6, scopes), token_version = token_version + 1, state = 'active',
         last_refresh_at = now(), last_error = NULL, updated_at = now()
       WHERE id = $1 RETURNING *`,
      [id, access, refresh, tokens.createdAt, tokens.expiresIn, tokens.scopes ?? null],
    );
    return this.toConnection(row);
  }

  /**
   * The tokens of a new authorization of the connection's owner, in place of its current ones
   * (which are overwritten: nothing keeps them): active again, its refresh history restarted.
   */
  async replaceTokens(manager: EntityManager, id: number, tokens: TokenSet, scopes: string[]): Promise<Connection> {
    const [access, refresh] = this.sealTokens(id, tokens);
    const [[row]] = await manager.query(
      `UPDATE connections SET access_token = $2, refresh_token = $3, token_created_at = $4, expires_in = $5,
         scopes = $6, token_version = token_version + 1, state = 'active', last_refresh_at = NULL,
         last_error = NULL, updated_at = now()
       WHERE id = $1 RETURNING *`,
      [id, access, refresh, tokens.createdAt, tokens.expiresIn, tokens.scopes ?? scopes],
    );
    return this.toConnection(row);
  }

  /** Forgets a connection and its sealed tokens; its subscriptions must be gone first (see SubscriptionService.retire). */
  async delete(manager: EntityManager, id: number): Promise<void> {
    await manager.query(`DELETE FROM connections WHERE id = $1`, [id]);
  }

  async setState(
    id: number,
    state: ConnectionState,
    lastError: string | null,
    manager: EntityManager = this.dataSource.manager,
  ): Promise<void> {
    await manager.query(`UPDATE connections SET state = $2, last_error = $3, updated_at = now() WHERE id = $1`, [
      id,
      state,
      lastError,
    ]);
  }

  /** Marks the active connections to earlier sandbox emulators as needing authorization again (a restarted sandbox). */
  async retireSandboxesBut(baseUrl: string, reason: string): Promise<number> {
    const [, count] = await this.dataSource.query(
      `UPDATE connections SET state = 'reauthorization_required', last_error = $2, updated_at = now()
        WHERE sandbox AND state = 'active' AND base_url <> $1`,
      [baseUrl, reason],
    );
    return count;
  }

  async setOwner(id: number, ownerId: string): Promise<void> {
    await this.dataSource.query(
      `UPDATE connections SET owner_id = $2, updated_at = now() WHERE id = $1 AND owner_id IS DISTINCT FROM $2`,
      [id, ownerId],
    );
  }

  private sealTokens(id: number, tokens: TokenSet): [Buffer, Buffer | null] {
    return [
      this.cipher.seal(tokens.accessToken, aad(id, 'access_token')),
      tokens.refreshToken === null ? null : this.cipher.seal(tokens.refreshToken, aad(id, 'refresh_token')),
    ];
  }

  /**
   * Tokens that no longer open (TOKEN_ENCRYPTION_KEY changed, or the generated key file lost) make
   * that one connection unusable, shown as needing authorization again, not every connection fail.
   */
  private toConnection(row: ConnectionRow): Connection {
    const id = Number(row.id);
    const connection: Connection = {
      id,
      authUrl: row.auth_url,
      baseUrl: row.base_url,
      scopes: row.scopes,
      state: row.state,
      sandbox: row.sandbox,
      accessToken: '',
      refreshToken: null,
      tokenCreatedAt: row.token_created_at,
      expiresIn: row.expires_in,
      tokenVersion: row.token_version,
      ownerId: row.owner_id,
      lastRefreshAt: row.last_refresh_at,
      lastError: row.last_error,
      createdAt: row.created_at,
    };
    try {
      connection.accessToken = this.cipher.open(row.access_token, aad(id, 'access_token'));
      connection.refreshToken =
        row.refresh_token === null ? null : this.cipher.open(row.refresh_token, aad(id, 'refresh_token'));
    } catch {
      return {
        ...connection,
        state: 'reauthorization_required',
        lastError: 'its tokens cannot be opened with the current TOKEN_ENCRYPTION_KEY',
      };
    }
    return connection;
  }
}
