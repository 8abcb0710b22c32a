import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

/** One row of `audit_log`, as written. */
export interface AuditRow {
  actorId: string;
  actorName: string;
  action: string;
  target: string;
  remoteAddress: string | null;
  detail: Record<string, unknown> | null;
}

/** An entry as `GET /api/v1/audit` shows it, with its id for the next page. */
export interface AuditEntryRow {
  id: string;
  at: Date;
  actor_id: string;
  actor_name: string;
  action: string;
  target: string;
  remote_address: string | null;
}

@Injectable()
export class AuditRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async insert(row: AuditRow): Promise<void> {
    await this.dataSource.query(
      `INSERT INTO audit_log (actor_id, actor_name, action, target, remote_address, detail)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [row.actorId, row.actorName, row.action, row.target, row.remoteAddress, row.detail],
    );
  }

  /** Up to `limit + 1` entries newest first (the extra one tells that a next page exists), below `before`. */
  page(limit: number, before: string | undefined, notBefore: Date): Promise<AuditEntryRow[]> {
    return this.dataSource.query(
      `SELECT id::text, at, actor_id, actor_name, action, target, remote_address
         FROM audit_log
        WHERE ($2::bigint IS NULL OR id < $2::bigint) AND at >= $3
        ORDER BY id DESC
        LIMIT $1 + 1`,
      [limit, before ?? null, notBefore.toISOString()],
    );
  }

  /** Deletes the entries older than `cutoff`; the number deleted. */
  async prune(cutoff: Date): Promise<number> {
    const [, deleted]: [unknown, number] = await this.dataSource.query(`DELETE FROM audit_log WHERE at < $1`, [
      cutoff.toISOString(),
    ]);
    return deleted;
  }
}
