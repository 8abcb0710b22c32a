import type { RunningEmulator } from '../src/emulator/emulator.factory.js';
import type { Faults } from '../src/emulator/fault-settings.js';
import { DEMO_USER_ID } from '../src/emulator/oauth/oauth-server.service.js';
import type { TokenAnswer } from '../src/emulator/oauth/oauth-server.service.js';
import { bootEmulator, control, recordIssuedTokens } from './emulator/emulator-client.js';
import { describeRun, runCli } from './support/cli.js';
import { eventually } from './support/eventually.js';
import { connect, startDaemonOn } from './support/connect.js';
import { api, RunningDaemon } from './support/http.js';

/**
 * docs/reference.md §6: the spec's token answer names no user; the owner of a connection comes from
 * Doorkeeper's `GET {auth_url}/oauth/token/info`, and when that answers 404 or 401, from the first
 * webhook delivered to the connection's key.
 */

let emulator: RunningEmulator;
let daemon: RunningDaemon;
let issued: TokenAnswer[] = [];

beforeAll(async () => {
  emulator = await bootEmulator({ demoData: true });
  issued = recordIssuedTokens(emulator);
  daemon = await startDaemonOn(emulator, { RECONCILE_CRON: 'off' });
}, 120_000);

afterAll(async () => {
  await daemon?.close();
  await emulator?.close();
});

async function setFaults(faults: Partial<Faults>): Promise<void> {
  expect((await control(emulator, 'POST', '/_emulator/faults', faults)).status).toBe(200);
}

async function owners(of: RunningDaemon = daemon): Promise<Record<number, string | null>> {
  const answer = await api(of.url, '/api/v1/connections');
  expect(answer.status).toBe(200);
  return Object.fromEntries(
    answer.json.data.map((connection: { id: number; owner_id: string | null }) => [connection.id, connection.owner_id]),
  );
}

describe('the owner of a connection', () => {
  it('is learned through /oauth/token/info by the connect flow: the token answer has no user id, and no webhook came yet', async () => {
    const connection = await connect(daemon.url);

    expect(issued).toHaveLength(1);
    expect(Object.keys(issued[0]).sort()).toEqual([
      'access_token',
      'created_at',
      'expires_in',
      'refresh_token',
      'scope',
      'token_type',
    ]);
    expect((await api(daemon.url, '/api/v1/events')).json.data).toEqual([]);
    expect(connection.owner_id).toBe(DEMO_USER_ID);
    expect(await owners()).toEqual({ [connection.id]: DEMO_USER_ID });
  });

  it('comes from the first webhook on its key when token info answers 404 or 401', async () => {
    // One daemon (its own database) per case: the platform sends an event to every endpoint, and a daemon logs it once.
    const cases: Array<{ status: number; daemon: RunningDaemon; connection: { id: number; owner_id: string | null } }> =
      [];
    try {
      for (const status of [404, 401]) {
        const other = await startDaemonOn(emulator, { RECONCILE_CRON: 'off' });
        cases.push({ status, daemon: other, connection: { id: 0, owner_id: null } });
        await setFaults({ token_info_status: status });
        cases.at(-1)!.connection = await connect(other.url);
      }
      await setFaults({});
      expect(cases.map(({ status, connection }) => ({ status, owner: connection.owner_id }))).toEqual([
        { status: 404, owner: null },
        { status: 401, owner: null },
      ]);

      const triggered = await control(emulator, 'POST', '/_emulator/trigger', { event_type: 'product.updated' });
      expect(triggered.status).toBeLessThan(300);
      for (const { status, daemon: other, connection } of cases) {
        await eventually(
          async () => {
            const events = await api(other.url, '/api/v1/events?event_type=product.updated');
            expect(events.json.data.map((event: { event_id: string }) => event.event_id)).toContain(
              triggered.json.event_ids[0],
            );
          },
          15_000,
          100,
        );
        // As before token info existed: reconcile (run here by hand) takes the owner of the webhooks seen on the connection's key.
        const env = { ...other.process.env };
        delete env.PATH;
        delete env.HOME;
        const run = await runCli(['reconcile'], env, other.process.cwd);
        expect({ status, code: run.code, output: run.code === 0 ? '' : describeRun(run) }).toEqual({
          status,
          code: 0,
          output: '',
        });
        expect({ status, owner: (await owners(other))[connection.id] }).toEqual({ status, owner: DEMO_USER_ID });
      }
    } finally {
      for (const { daemon: other } of cases) await other.close();
    }
  }, 120_000);
});
