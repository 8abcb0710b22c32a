import { API_TOKEN } from './http.js';
import type { Answer } from './http.js';

/**
 * The browser side of the connect flow (CONTRACT §6): the daemon's /auth/connect, the
 * authorization server's auto-approval, the daemon's callback; no redirect followed by fetch.
 */

/** A GET that does not follow redirects, read whole, with the Location header. */
export async function get(url: string, init: RequestInit = {}): Promise<Answer & { location: string | null }> {
  const response = await fetch(url, { redirect: 'manual', ...init });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, bytes: Buffer.from(text), text, json, location: response.headers.get('location') };
}

/** GET /auth/connect, then the authorization server's redirect: the daemon's callback URL and the state. */
export async function authorize(daemonUrl: string): Promise<{ authorizeUrl: string; callbackUrl: string; state: string }> {
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
