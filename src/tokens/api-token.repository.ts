import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { ApiRole } from '../config/app-config.js';

/** A stored token as the API shows it (never its digest). */
export interface ApiTokenRecord {
  id: string;
  name: string;
  role: ApiRole;
  ownerIds: string[] | null;
  expiresAt: Date | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  /** `created_at` to the microsecond (UTC), where a page ends. */
  createdKey: string;
}

/** What the guard needs of a stored token. */
export interface ApiTokenCredential {
  id: string;
  name: string;
  role: ApiRole;
  ownerIds: string[] | null;
  digest: Buffer;
  expiresAt: Date | null;
}

export interface NewApiToken {
  id: string;
  name: string;
  role: ApiRole;
  ownerIds: string[] | null;
  digest: Buffer;
  expiresAt: Date | null;
}

export interface TokenPageKey {
  createdAt: string;
  id: string;
}

interface RecordRow {
  id: string;
  name: string;
  role: ApiRole;
  owner_ids: string[] | null;
  expires_at: Date | null;
  created_at: Date;
  last_used_at: Date | null;
  created_key: string;
}

const RECORD_COLUMNS = `id, name, role, owner_ids, expires_at, created_at, last_used_at,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_key`;

const record = (row: RecordRow): ApiTokenRecord => ({
  id: row.id,
  name: row.name,
  role: row.role,
  ownerIds: row.owner_ids,
  expiresAt: row.expires_at,
  createdAt: row.created_at,
  lastUsedAt: row.last_used_at,
  createdKey: row.created_key,
});

/** The `api_tokens` table (migrations/1765700000000-api-tokens.ts): secrets only as digests. */
@Injectable()
export class ApiTokenRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async insert(token: NewApiToken): Promise<ApiTokenRecord> {
    const rows: RecordRow[] = await this.dataSource.query(
      `INSERT INTO api_tokens (id, name, role, owner_ids, digest, expires_at) VALUES ($1, $2, $3, $4, $5, $6)
        RETURNING ${RECORD_COLUMNS}`,
      [token.id, token.name, token.role, token.ownerIds, token.digest, token.expiresAt],
    );
    return record(rows[0]);
  }

  /** Up to `limit` tokens after `after`, oldest first. */
  async page(limit: number, after?: TokenPageKey): Promise<ApiTokenRecord[]> {
    const rows: RecordRow[] = await this.dataSource.query(
      `SELECT ${RECORD_COLUMNS} FROM api_tokens
        WHERE $2::timestamptz IS NULL OR (created_at, id) > ($2::timestamptz, $3::uuid)
        ORDER BY created_at, id LIMIT $1`,
      [limit, after?.createdAt ?? null, after?.id ?? null],
    );
    return rows.map(record);
  }

  /** Removes the token; false when there is none of that id. */
  async remove(id: string): Promise<boolean> {
    const [, count]: [unknown, number] = await this.dataSource.query(`DELETE FROM api_tokens WHERE id = $1`, [id]);
    return count > 0;
  }

  /** The ids (at most two: enough to tell an ambiguous prefix) starting with `prefix`. */
  async idsStartingWith(prefix: string): Promise<string[]> {
    const rows: Array<{ id: string }> = await this.dataSource.query(
      `SELECT id FROM api_tokens WHERE id::text LIKE $1 || '%' ORDER BY id LIMIT 2`,
      [prefix],
    );
    return rows.map((row) => row.id);
  }

  /** Every stored token, expired ones too (the guard checks expiry itself, against its clock). */
  async credentials(): Promise<ApiTokenCredential[]> {
    const rows: Array<{
      id: string;
      name: string;
      role: ApiRole;
      owner_ids: string[] | null;
      digest: Buffer;
      expires_at: Date | null;
    }> = await this.dataSource.query(`SELECT id, name, role, owner_ids, digest, expires_at FROM api_tokens`);
    return rows.map((row) => ({
      id: row.id,
      name: row.name,
      role: row.role,
      ownerIds: row.owner_ids,
      digest: row.digest,
      expiresAt: row.expires_at,
    }));
  }

  /** Notes a use; never moves `last_used_at` back. */
  async touch(id: string, at: Date): Promise<void> {
    await this.dataSource.query(
      `UPDATE api_tokens SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)`,
      [id, at],
    );
  }
}
