import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';

/** libpq's sslmode values, weakest first. */
export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

/** The URL parameters that this module reads (and takes out of what node-postgres is given). */
const TLS_PARAMETERS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey'];

export const isSslMode = (value: string): value is SslMode => (SSL_MODES as readonly string[]).includes(value);

/** A TLS setting that cannot be used; the message names the parameter, never the URL. */
export class DatabaseTlsError extends Error {}

/**
 * node-postgres' `ssl` for an sslmode as libpq reads it: `disable` and `allow` connect in plain
 * text, `prefer` and `require` encrypt without checking the certificate (`require` checks the chain
 * when a CA is given, as libpq does with a root certificate), `verify-ca` checks the chain against
 * `ca`, `verify-full` the chain (against `ca`, or the system's CAs without one) and the host name.
 * Unlike libpq, `allow` never retries with TLS and `prefer` never falls back to plain text.
 */
export function sslOptions(mode: SslMode, ca?: string, client: { cert?: string; key?: string } = {}) {
  if (mode === 'disable' || mode === 'allow') return false;
  const options: ConnectionOptions = { ...client, ...(ca === undefined ? {} : { ca }) };
  if ((mode === 'prefer' || mode === 'require') && ca === undefined) return { ...options, rejectUnauthorized: false };
  if (mode === 'verify-ca' && ca === undefined) {
    throw new DatabaseTlsError('sslmode=verify-ca needs a CA file (sslrootcert, or DATABASE_SSL_ROOT_CERT)');
  }
  if (mode === 'verify-full') return options;
  return { ...options, checkServerIdentity: () => undefined };
}

export interface PostgresTls {
  /** The URL without its TLS parameters: node-postgres would otherwise read them its own way. */
  url: string;
  /** Unset when the URL says nothing of TLS: node-postgres' own default (plain text). */
  ssl?: false | ConnectionOptions;
}

/**
 * The TLS of a PostgreSQL URL read as libpq reads it: `sslmode`, `sslrootcert` (a CA file, or
 * `system` for the system's CAs), `sslcert` and `sslkey` (a client certificate). A CA without an
 * sslmode means `verify-full`; other TLS parameters without one, libpq's `prefer`.
 */
export function postgresTls(text: string): PostgresTls {
  const url = new URL(text);
  const get = (name: string) => url.searchParams.get(name) ?? undefined;
  const [mode, rootCert, cert, key] = TLS_PARAMETERS.map(get);
  if (TLS_PARAMETERS.every((name) => !url.searchParams.has(name))) return { url: text };
  for (const name of TLS_PARAMETERS) url.searchParams.delete(name);
  if (mode !== undefined && !isSslMode(mode)) {
    throw new DatabaseTlsError(`sslmode must be one of ${SSL_MODES.join(', ')}`);
  }
  const ca = rootCert === undefined || rootCert === 'system' ? undefined : readPem('sslrootcert', rootCert);
  const client = {
    ...(cert === undefined ? {} : { cert: readPem('sslcert', cert) }),
    ...(key === undefined ? {} : { key: readPem('sslkey', key) }),
  };
  const effective: SslMode = mode ?? (rootCert !== undefined ? 'verify-full' : 'prefer');
  return { url: url.toString(), ssl: sslOptions(effective, ca, client) };
}

/** `url` with `rootCert` as its CA file, unless the URL names one itself (its own parameter wins, as with libpq). */
export function withRootCert(url: string, rootCert: string | undefined): string {
  if (rootCert === undefined) return url;
  const parsed = new URL(url);
  if (parsed.searchParams.has('sslrootcert')) return url;
  parsed.searchParams.set('sslrootcert', rootCert);
  return parsed.toString();
}

export function readPem(parameter: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new DatabaseTlsError(`${parameter}: cannot read ${file} (${(error as NodeJS.ErrnoException).code})`);
  }
}

/** What node's TLS and node-postgres answer when the server's certificate or TLS itself is refused. */
const TLS_REFUSALS = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * Node 22.15+ ends a certificate refusal with "; if the root CA is installed locally, try running
 * Node.js with --use-system-ca": advice for Node's own trust store, not for a CA named by
 * `sslrootcert`. Dropped, so the reason reads the same on every Node.
 */
const SYSTEM_CA_HINT = /; if the root CA is installed locally, try running Node\.js with --use-system-ca$/;

/** A TLS error's message without Node's --use-system-ca hint. */
export function tlsReason(message: string): string {
  return message.replace(SYSTEM_CA_HINT, '');
}

/**
 * A TLS refusal on `url` as one line naming the server, the sslmode and the reason (not the
 * certificate object node attaches, nor the URL's password); null for any other error.
 */
export function tlsRefusal(error: unknown, url: string): DatabaseTlsError | null {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  const refused =
    (typeof code === 'string' && TLS_REFUSALS.has(code)) || message === 'The server does not support SSL connections';
  if (!refused) return null;
  const parsed = new URL(url);
  const mode =
    parsed.searchParams.get('sslmode') ?? (parsed.searchParams.has('sslrootcert') ? 'verify-full' : 'prefer');
  return new DatabaseTlsError(
    `TLS to PostgreSQL at ${parsed.host} refused (sslmode=${mode}): ${tlsReason(String(message))}${typeof code === 'string' ? ` (${code})` : ''}`,
  );
}
