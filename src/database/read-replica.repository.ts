import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { READ_DATA_SOURCE } from './read-replica.js';

/**
 * What ReadRouter decides by: the primary's WAL position, how far the replica has replayed, and
 * whether the replica sees a transaction. The replica's data source is opened on first use, and
 * again after a failed attempt: a replica down when the daemon starts must not stop it.
 */
@Injectable()
export class ReadReplicaRepository implements OnApplicationShutdown {
  private opening?: Promise<DataSource>;

  constructor(
    @InjectDataSource() private readonly primary: DataSource,
    @Inject(READ_DATA_SOURCE) private readonly replica: DataSource | null,
  ) {}

  /** The primary's current WAL position, in bytes. */
  async primaryWalPosition(): Promise<bigint> {
    const [row]: Array<{ position: string }> = await this.primary.query(
      `SELECT (pg_current_wal_lsn() - '0/0')::text AS position`,
    );
    return BigInt(row.position);
  }

  /** The WAL position up to which the replica has replayed (its own current one if it is not in recovery). */
  async replayedWalPosition(): Promise<bigint> {
    const [row]: Array<{ position: string }> = await (
      await this.open()
    ).query(
      `SELECT (CASE WHEN pg_is_in_recovery() THEN coalesce(pg_last_wal_replay_lsn(), '0/0') ELSE pg_current_wal_lsn() END
               - '0/0')::text AS position`,
    );
    return BigInt(row.position);
  }

  /** Whether the replica's snapshots see transaction `transactionId` as ended: it has replayed its commit. */
  async sees(transactionId: string): Promise<boolean> {
    const [row]: Array<{ sees: boolean }> = await (
      await this.open()
    ).query(`SELECT pg_visible_in_snapshot($1::xid8, pg_current_snapshot()) AS sees`, [transactionId]);
    return row.sees;
  }

  async onApplicationShutdown(): Promise<void> {
    const opened = await this.opening?.catch(() => undefined);
    if (opened?.isInitialized) await opened.destroy();
  }

  private open(): Promise<DataSource> {
    const replica = this.replica;
    if (replica === null) return Promise.reject(new Error('no DATABASE_READ_URL'));
    this.opening ??= (replica.isInitialized ? Promise.resolve(replica) : replica.initialize()).catch((error) => {
      this.opening = undefined;
      throw error;
    });
    return this.opening;
  }
}
