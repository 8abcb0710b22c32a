import { readPem, sslOptions } from '../../database/database-tls.js';
import type { TableTarget } from './table-target.js';

const SSL_MODES = { require: 'require', 'verify-ca': 'verify-ca', verify: 'verify-full' } as const;

/** node-postgres' `ssl` for a target; its CA file is read at every call (a pool's creation). */
export function postgresTargetSsl(target: TableTarget) {
  if (target.tls === 'disable') return false;
  return sslOptions(
    SSL_MODES[target.tls],
    target.rootCert === null ? undefined : readPem('sslrootcert', target.rootCert),
  );
}

/** mysql2's `ssl` for a target. */
export function mysqlTargetSsl(target: TableTarget) {
  if (target.tls === 'disable') return undefined;
  const ca = target.rootCert === null ? {} : { ca: readPem('ssl-ca', target.rootCert) };
  return { ...ca, rejectUnauthorized: target.tls !== 'require', verifyIdentity: target.tls === 'verify' };
}
