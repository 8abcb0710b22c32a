import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { postgresTls, tlsReason, tlsRefusal, withRootCert } from './database-tls.js';

/** libpq's sslmode as node-postgres options (docs/reference.md §13, TLS). */
describe('postgresTls', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'menu-sync-tls-unit-'));
  const ca = path.join(dir, 'ca.pem');
  writeFileSync(ca, 'CA PEM');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const base = 'postgres://app:s%40cret@127.0.0.1:5432/menu_sync';
  const of = (query: string) => postgresTls(`${base}?${query}`);

  it('leaves a URL without TLS parameters as it is (node-postgres default: plain text)', () => {
    expect(postgresTls(base)).toEqual({ url: base });
    expect(postgresTls(`${base}?application_name=x`)).toEqual({ url: `${base}?application_name=x` });
  });

  it('takes the TLS parameters out of the URL, keeps the others', () => {
    expect(of(`sslmode=require&application_name=x&sslrootcert=${ca}`).url).toBe(`${base}?application_name=x`);
  });

  it('maps each sslmode as libpq reads it', () => {
    const checks = (query: string) => {
      const { ssl } = of(query);
      if (ssl === false || ssl === undefined) return ssl;
      return {
        ca: ssl.ca ?? null,
        chain: ssl.rejectUnauthorized !== false,
        host: ssl.checkServerIdentity === undefined,
      };
    };
    expect(checks('sslmode=disable')).toBe(false);
    expect(checks('sslmode=allow')).toBe(false);
    expect(checks('sslmode=prefer')).toEqual({ ca: null, chain: false, host: true });
    expect(checks('sslmode=require')).toEqual({ ca: null, chain: false, host: true });
    expect(checks(`sslmode=require&sslrootcert=${ca}`)).toEqual({ ca: 'CA PEM', chain: true, host: false });
    expect(checks(`sslmode=verify-ca&sslrootcert=${ca}`)).toEqual({ ca: 'CA PEM', chain: true, host: false });
    expect(checks('sslmode=verify-full')).toEqual({ ca: null, chain: true, host: true });
    expect(checks(`sslmode=verify-full&sslrootcert=${ca}`)).toEqual({ ca: 'CA PEM', chain: true, host: true });
    expect(checks(`sslrootcert=${ca}`)).toEqual({ ca: 'CA PEM', chain: true, host: true });
    expect(checks('sslrootcert=system')).toEqual({ ca: null, chain: true, host: true });
  });

  it('refuses what cannot be used, without repeating the URL', () => {
    expect(() => of('sslmode=verify-ca')).toThrow(
      'sslmode=verify-ca needs a CA file (sslrootcert, or DATABASE_SSL_ROOT_CERT)',
    );
    expect(() => of('sslmode=on')).toThrow(
      'sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full',
    );
    expect(() => of(`sslrootcert=${dir}/missing.pem`)).toThrow(`sslrootcert: cannot read ${dir}/missing.pem (ENOENT)`);
  });

  it('withRootCert adds DATABASE_SSL_ROOT_CERT unless the URL names its own CA', () => {
    expect(withRootCert(base, undefined)).toBe(base);
    expect(new URL(withRootCert(base, ca)).searchParams.get('sslrootcert')).toBe(ca);
    const own = `${base}?sslrootcert=%2Fown.pem`;
    expect(withRootCert(own, ca)).toBe(own);
  });

  it('tlsRefusal names the server and the mode of a refused certificate, never the password; null otherwise', () => {
    const refused = Object.assign(new Error('unable to verify the first certificate'), {
      code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    });
    expect(tlsRefusal(refused, `${base}?sslrootcert=${ca}`)?.message).toBe(
      'TLS to PostgreSQL at 127.0.0.1:5432 refused (sslmode=verify-full): unable to verify the first certificate (UNABLE_TO_VERIFY_LEAF_SIGNATURE)',
    );
    expect(tlsRefusal(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), base)).toBeNull();
  });
});

describe('tlsReason', () => {
  it('drops the hint Node 22.15+ adds about its own trust store, and only that', () => {
    const hint = '; if the root CA is installed locally, try running Node.js with --use-system-ca';
    expect(tlsReason(`unable to verify the first certificate${hint}`)).toBe('unable to verify the first certificate');
    expect(tlsReason('unable to verify the first certificate')).toBe('unable to verify the first certificate');
    expect(tlsReason(`self-signed certificate${hint} (again)`)).toBe(`self-signed certificate${hint} (again)`);
  });
});
