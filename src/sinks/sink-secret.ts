import { randomBytes } from 'node:crypto';

/** A Standard Webhooks secret: `whsec_` and 32 random bytes in base64 (what `standardwebhooks` reads). */
export function generateSinkSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}
