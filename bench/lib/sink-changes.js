// What the sink benchmarks share: the daemon's environment, a change log filled by SQL, sink creation.
import { randomBytes } from 'node:crypto';

/** The daemon's environment for a sink bench: no API tokens, loopback targets allowed by the egress guard. */
export function sinkBenchEnv(extra = {}) {
  const env = {
    ...process.env,
    TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    HOST: '127.0.0.1',
    SANDBOX: 'false',
    LOG_LEVEL: 'warn',
    RECONCILE_CRON: 'off',
    // The targets are on loopback, which the egress guard refuses unless allowed.
    SINK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128',
    ...extra,
  };
  delete env.API_TOKENS;
  return env;
}

/** N changes of distinct products (owner 1), in chunks of 100k (one transaction each), then VACUUM ANALYZE. */
export async function fillProductChanges(client, n) {
  await client.query('SET synchronous_commit = off');
  for (let from = 1; from <= n; from += 100_000) {
    const to = Math.min(n, from + 99_999);
    await client.query(
      `
      INSERT INTO change_log (change_id, type, id, owner_id, op, resource)
      SELECT 'bench-' || g, 'product', g::text, '1', 'upsert',
             menu_sync_resource('product', g::text, '1', jsonb_build_object('id', g, 'title', 'Product ' || g, 'available', true,
               'base_cost', jsonb_build_object('GBP', jsonb_build_object('cents', 300 + g % 2000))), '{"traits":{"data":[]}}'::jsonb,
               'bench-event-' || g, now(), g, false)
        FROM generate_series($1::bigint, $2::bigint) g`,
      [from, to],
    );
  }
  await client.query('VACUUM ANALYZE change_log');
}

/** POST a JSON body; the parsed answer, which must be a 201. */
export async function postJson(url, body) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = await response.json();
  if (response.status !== 201) throw new Error(`${url}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}
