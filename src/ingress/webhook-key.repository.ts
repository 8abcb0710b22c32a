import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

export interface ActiveWebhookKey {
  id: number;
  keyHash: Buffer;
  connectionId: number | null;
}

@Injectable()
export class WebhookKeyRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Keys still accepted: never rotated, or rotated with an overlap that has not yet ended. */
  async listActive(): Promise<ActiveWebhookKey[]> {
    const rows: Array<{ id: string; key_hash: Buffer; connection_id: string | null }> = await this.dataSource.query(
      `SELECT id, key_hash, connection_id FROM webhook_keys WHERE expires_at IS NULL OR expires_at > now()`,
    );
    return rows.map((row) => ({
      id: Number(row.id),
      keyHash: row.key_hash,
      connectionId: row.connection_id === null ? null : Number(row.connection_id),
    }));
  }

  /** Stores a new key (its hash only) for a connection; returns its id. */
  async add(keyHash: Buffer, connectionId: number | null): Promise<number> {
    const [row]: Array<{ id: string }> = await this.dataSource.query(
      `INSERT INTO webhook_keys (key_hash, connection_id) VALUES ($1, $2) RETURNING id`,
      [keyHash, connectionId],
    );
    return Number(row.id);
  }

  /**
   * Rotation with an overlap (docs/reference.md §2): the connection's other unexpired keys stop working after
   * `overlapSeconds`, so deliveries already on their way to the older endpoints still land meanwhile.
   */
  async expireOthers(connectionId: number, keepId: number, overlapSeconds: number): Promise<number> {
    const [, count] = await this.dataSource.query(
      `UPDATE webhook_keys SET expires_at = now() + make_interval(secs => $3)
        WHERE connection_id = $1 AND id <> $2 AND (expires_at IS NULL OR expires_at > now() + make_interval(secs => $3))`,
      [connectionId, keepId, overlapSeconds],
    );
    return count;
  }

  /** Stops accepting a key from now on (a key no endpoint upstream will ever use). */
  async expire(id: number): Promise<void> {
    await this.dataSource.query(
      `UPDATE webhook_keys SET expires_at = now() WHERE id = $1 AND (expires_at IS NULL OR expires_at > now())`,
      [id],
    );
  }
}
