import { BeforeApplicationShutdown, Injectable, Logger } from '@nestjs/common';
import { JetStreamApiError, jetstream, jetstreamManager, JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { connect, NatsConnection } from '@nats-io/transport-node';
import { AppConfig } from '../../config/app-config.js';
import type { ChangeText } from '../../changes/change.js';
import type { DeliveryOutcome } from '../delivery.js';

/** `<prefix>.<owner_id>.<type>.<id>`; NATS subject tokens cannot hold `.`, `*`, `>` or whitespace. */
export function changeSubject(prefix: string, change: Pick<ChangeText, 'ownerId' | 'type' | 'id'>): string {
  return `${prefix}.${subjectToken(change.ownerId ?? '_')}.${subjectToken(change.type)}.${subjectToken(change.id)}`;
}

function subjectToken(value: string): string {
  return value === '' ? '_' : value.replace(/[.*>\s]/g, '_');
}

export interface NatsBatch {
  stream: string;
  subjectPrefix: string;
  changes: ChangeText[];
  timeoutMs: number;
}

/**
 * One NATS connection (NATS_URL) shared by every nats sink. Each change of a batch is published
 * with `Nats-Msg-Id` = its change_id, all at once, and the batch counts as acknowledged only when
 * JetStream acknowledged every message; a retried batch is deduplicated by JetStream.
 */
@Injectable()
export class NatsSinkClient implements BeforeApplicationShutdown {
  private readonly logger = new Logger(NatsSinkClient.name);
  private connection?: Promise<{ nc: NatsConnection; js: JetStreamClient; jsm: JetStreamManager }>;
  private readonly streams = new Map<string, Promise<void>>();

  constructor(private readonly config: AppConfig) {}

  async publish(batch: NatsBatch): Promise<DeliveryOutcome> {
    try {
      const { js, jsm } = await this.connect();
      await this.ensureStream(jsm, batch.stream, batch.subjectPrefix);
      const acks = await Promise.all(
        batch.changes.map((change) =>
          js.publish(changeSubject(batch.subjectPrefix, change), change.json, {
            msgID: change.changeId,
            timeout: batch.timeoutMs,
            expect: { streamName: batch.stream },
          }),
        ),
      );
      const last = acks[acks.length - 1];
      const duplicates = acks.filter((ack) => ack.duplicate).length;
      return {
        kind: 'ok',
        status: 0,
        response: JSON.stringify({ stream: last?.stream, acks: acks.length, last_seq: last?.seq, duplicates }),
      };
    } catch (error) {
      this.streams.delete(batch.stream);
      return {
        kind: 'retry',
        error: `JetStream: ${(error as Error)?.message ?? 'unknown error'}`,
        // A JetStream API error's code (10077, …); 0 when JetStream gave none (no connection, a timeout).
        status: error instanceof JetStreamApiError ? error.code : 0,
      };
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    const connection = this.connection;
    this.connection = undefined;
    if (connection) await connection.then(({ nc }) => nc.drain()).catch(() => undefined);
  }

  private connect() {
    if (this.config.NATS_URL === undefined) return Promise.reject(new Error('NATS_URL is not set'));
    this.connection ??= (async () => {
      // noAsyncTraces: no stack captured per publish, in case it times out (a batch publishes hundreds).
      const nc = await connect({
        servers: this.config.NATS_URL,
        name: 'menu-sync',
        maxReconnectAttempts: -1,
        noAsyncTraces: true,
      });
      void nc.closed().then(() => {
        this.connection = undefined;
        this.streams.clear();
      });
      this.logger.log('connected to NATS');
      return { nc, js: jetstream(nc), jsm: await jetstreamManager(nc) };
    })().catch((error) => {
      this.connection = undefined;
      throw error;
    });
    return this.connection;
  }

  /** Creates the stream bound to `<prefix>.>` when it is absent; an existing stream is left as it is. */
  private ensureStream(jsm: JetStreamManager, stream: string, prefix: string): Promise<void> {
    let ensured = this.streams.get(stream);
    if (!ensured) {
      ensured = (async () => {
        try {
          await jsm.streams.info(stream);
        } catch (error) {
          if ((error as { name?: string })?.name !== 'StreamNotFoundError') throw error;
          await jsm.streams.add({ name: stream, subjects: [`${prefix}.>`] });
          this.logger.log({ msg: 'created the JetStream stream', stream });
        }
      })();
      this.streams.set(stream, ensured);
      ensured.catch(() => this.streams.delete(stream));
    }
    return ensured;
  }
}
