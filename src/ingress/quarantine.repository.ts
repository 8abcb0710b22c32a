import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

export interface QuarantineEntry {
  receivedAt: Date;
  status: number;
  reason: string;
  field: string | null;
  keyId: string | null;
  contentType: string | null;
  sha256: Buffer;
  body: Buffer;
  /** The owner the body names, when it can be read (ownerOfRejected). */
  ownerId: string | null;
}

export interface QuarantinedDelivery extends QuarantineEntry {
  id: number;
}

@Injectable()
export class QuarantineRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Keeps the rejected body and prunes all but the newest `keep` entries, in one statement. */
  async add(entry: QuarantineEntry, keep: number): Promise<void> {
    await this.dataSource.query(
      `WITH added AS (
         INSERT INTO quarantine (received_at, status, reason, field, key_id, content_type, sha256, body, owner_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $10) RETURNING id)
       DELETE FROM quarantine WHERE id <= (SELECT id FROM added) - $9::bigint`,
      [
        entry.receivedAt,
        entry.status,
        entry.reason,
        entry.field,
        entry.keyId,
        entry.contentType,
        entry.sha256,
        entry.body,
        keep,
        entry.ownerId,
      ],
    );
  }

  /** Entries after `after`, oldest first (below `before`, newest first); with `ownerIds`, only those naming one of them. */
  async list(
    page: { after: number; before?: number; limit: number },
    ownerIds?: readonly string[],
  ): Promise<QuarantinedDelivery[]> {
    const rows: Array<Record<string, unknown>> = await this.dataSource.query(
      `SELECT id, received_at, status, reason, field, key_id, content_type, sha256, body, owner_id
         FROM quarantine WHERE id > $1 AND ($3::bigint IS NULL OR id < $3)
              ${ownerIds === undefined ? '' : 'AND owner_id = ANY($4::text[])'}
        ORDER BY id ${page.before === undefined ? '' : 'DESC'} LIMIT $2`,
      [page.after, page.limit, page.before ?? null, ...(ownerIds === undefined ? [] : [ownerIds])],
    );
    return rows.map((row) => ({
      id: Number(row.id),
      receivedAt: row.received_at as Date,
      status: Number(row.status),
      reason: row.reason as string,
      field: row.field as string | null,
      keyId: row.key_id as string | null,
      contentType: row.content_type as string | null,
      sha256: row.sha256 as Buffer,
      body: row.body as Buffer,
      ownerId: row.owner_id as string | null,
    }));
  }

  /** Deletes the entries received before `before`; answers how many. */
  async prune(before: Date): Promise<number> {
    const [, deleted]: [unknown, number] = await this.dataSource.query(
      `DELETE FROM quarantine WHERE received_at < $1`,
      [before],
    );
    return deleted;
  }
}
