import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { connect, NatsConnection } from '@nats-io/transport-node';

export const NATS_URL = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

/** NATS with JetStream at 127.0.0.1:4222, started (as .ci/run does) when it is down. */
export async function ensureNats(): Promise<NatsConnection> {
  try {
    return await connect({ servers: NATS_URL, timeout: 2000 });
  } catch {
    await promisify(execFile)('start-stop-daemon', [
      '--start',
      '--oknodo',
      '--background',
      '--exec',
      '/usr/sbin/nats-server',
      '--',
      '-a',
      '127.0.0.1',
      '-p',
      '4222',
      '-js',
      '-sd',
      '/var/lib/nats-server',
    ]);
    for (let attempt = 0; ; attempt++) {
      try {
        return await connect({ servers: NATS_URL, timeout: 2000 });
      } catch (error) {
        if (attempt >= 20) throw error;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  }
}
