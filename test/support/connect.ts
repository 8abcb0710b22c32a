import type { RunningEmulator } from '../../src/emulator/emulator.factory.js';
import { clientOf, fetchReply } from '../emulator/emulator-client.js';
import type { Reply } from '../emulator/emulator-client.js';
import { freePort } from './daemon-process.js';
import { API_TOKEN, startDaemon } from './http.js';
import type { RunningDaemon } from './http.js';

/**
 * The browser side of the connect flow (docs/reference.md §6): the daemon's /auth/connect, the
 * authorization server's auto-approval, the daemon's callback; no redirect followed by fetch.
 */

/** A GET that does not follow redirects, read whole, with the Location header. */
export async function get(url: string, init: RequestInit = {}): Promise<Reply & { location: string | null }> {
  const reply = await fetchReply(url, init);
  return { ...reply, location: reply.headers.get('location') };
}

/** GET /auth/connect, then the authorization server's redirect: the daemon's callback URL and the state. */
export async function authorize(
  daemonUrl: string,
): Promise<{ authorizeUrl: string; callbackUrl: string; state: string }> {
  // Starting a connection is the operator's act: the API token, as a browser would pass it.
  const start = await get(`${daemonUrl}/auth/connect?api_token=${encodeURIComponent(API_TOKEN)}`);
  expect(start.status).toBe(302);
  const authorizeUrl = start.location!;
  const approved = await get(authorizeUrl);
  expect(approved.status).toBe(302);
  const callbackUrl = approved.location!;
  return { authorizeUrl, callbackUrl, state: new URL(authorizeUrl).searchParams.get('state')! };
}

/** The whole flow, as a user's browser would go through it: the stored connection the callback answers. */
export async function connect(daemonUrl: string): Promise<any> {
  const { callbackUrl } = await authorize(daemonUrl);
  const answer = await get(callbackUrl);
  if (answer.status !== 200) throw new Error(`the callback answered ${answer.status}: ${answer.text}`);
  return answer.json.data;
}

/**
 * A built daemon whose configured upstream is `emulator` (its application's credentials), on a
 * free port known beforehand, so PUBLIC_URL (callbacks, webhook URIs) is the daemon's own address.
 */
export async function startDaemonOn(
  emulator: RunningEmulator,
  env: Record<string, string> = {},
): Promise<RunningDaemon> {
  const port = await freePort();
  const { client_id, client_secret } = clientOf(emulator);
  return startDaemon({
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    UPSTREAM_AUTH_URL: emulator.url,
    UPSTREAM_BASE_URL: emulator.url,
    OAUTH_CLIENT_ID: client_id,
    OAUTH_CLIENT_SECRET: client_secret,
    ...env,
  });
}
