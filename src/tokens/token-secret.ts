import { createHash, randomBytes } from 'node:crypto';

/** What every stored token's secret starts with, so that one found in a log or a repository is recognised. */
export const TOKEN_PREFIX = 'mst_';

/** A new secret: 256 random bits, base64url, after the prefix. */
export const newTokenSecret = (): string => `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;

/**
 * What is stored of a secret: its SHA-256. A slow hash would add nothing: the secret is 256 random
 * bits, so no digest can be searched back to it (the guard digests API_TOKENS the same way).
 */
export const tokenDigest = (secret: string): Buffer => createHash('sha256').update(secret).digest();
