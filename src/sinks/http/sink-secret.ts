import { createHmac, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';

/** A Standard Webhooks secret: `whsec_` and 32 random bytes in base64 (what `standardwebhooks` reads). */
export function generateSinkSecret(): string {
  return `${PREFIX}${randomBytes(32).toString('base64')}`;
}

/**
 * The Standard Webhooks signature of a message, `v1,<base64 HMAC-SHA256>` over
 * `<id>.<timestamp>.<body>` keyed by the secret's base64-decoded bytes: what the `standardwebhooks`
 * library signs and verifies (a spec holds the two equal), hashed natively.
 */
export function webhookSignature(secret: string, webhookId: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
  const hmac = createHmac('sha256', key).update(`${webhookId}.${timestampSeconds}.`).update(body);
  return `v1,${hmac.digest('base64')}`;
}
