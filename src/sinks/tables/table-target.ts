/** The sink kinds that write tables in the user's database (docs/reference.md §12). */
export const TABLE_SINK_KINDS = ['postgres', 'mysql'] as const;
export type TableSinkKind = (typeof TABLE_SINK_KINDS)[number];

export const isTableKind = (kind: string): kind is TableSinkKind =>
  (TABLE_SINK_KINDS as readonly string[]).includes(kind);

export const DEFAULT_SCHEMA = 'menu_sync';
export const DEFAULT_TABLE_PREFIX = 'menu_sync_';
/** Identifiers are quoted everywhere besides; lowercase only, so no server folds or compares their case differently. */
export const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;
/** At most 32 characters, so the prefix and the longest table name stay within MySQL's 64. */
export const TABLE_PREFIX_PATTERN = /^[a-z_][a-z0-9_]{0,31}$/;

/**
 * TLS of the connection: off, encrypted without checking the certificate, the certificate's chain
 * checked (against `rootCert`), or the chain and the host name.
 */
export type TableTls = 'disable' | 'require' | 'verify-ca' | 'verify';

/** A target database as its URL names it. */
export interface TableTarget {
  kind: TableSinkKind;
  host: string;
  port: number;
  user: string;
  password: string | null;
  database: string;
  tls: TableTls;
  /** The CA file (PEM) the server's certificate must chain to; null: the system's CAs. */
  rootCert: string | null;
}

const PROTOCOLS: Record<string, TableSinkKind> = {
  'postgres:': 'postgres',
  'postgresql:': 'postgres',
  'mysql:': 'mysql',
};
const DEFAULT_PORTS: Record<TableSinkKind, number> = { postgres: 5432, mysql: 3306 };
/** libpq's and the MySQL client's names; a CA given with `require` checks the chain, as both clients do. */
const TLS_PARAMETERS: Record<TableSinkKind, { name: string; ca: string; values: Record<string, TableTls> }> = {
  postgres: {
    name: 'sslmode',
    ca: 'sslrootcert',
    values: { disable: 'disable', require: 'require', 'verify-ca': 'verify-ca', 'verify-full': 'verify' },
  },
  mysql: {
    name: 'ssl-mode',
    ca: 'ssl-ca',
    values: { DISABLED: 'disable', REQUIRED: 'require', VERIFY_CA: 'verify-ca', VERIFY_IDENTITY: 'verify' },
  },
};

/** The target a table sink's URL names, or why it names none (a sentence that never repeats the URL). */
export function parseTableUrl(kind: TableSinkKind, text: string): TableTarget | string {
  const expected =
    kind === 'postgres'
      ? 'a postgres://user:password@host:port/database URL'
      : 'a mysql://user:password@host:port/database URL';
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return `url must be ${expected}`;
  }
  if (PROTOCOLS[url.protocol] !== kind || url.hostname === '' || url.username === '') return `url must be ${expected}`;
  const database = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (database.includes('/') || (kind === 'mysql' && database === '')) return `url must be ${expected}`;
  const tlsParameter = TLS_PARAMETERS[kind];
  let tls: TableTls | undefined;
  let rootCert: string | null = null;
  for (const [name, value] of url.searchParams) {
    if (name === tlsParameter.ca && value !== '') rootCert = value;
    else if (name === tlsParameter.name && tlsParameter.values[value] !== undefined) tls = tlsParameter.values[value];
    else
      return `url may only carry ${tlsParameter.name}=${Object.keys(tlsParameter.values).join('|')} and ${tlsParameter.ca}=<CA file> as parameters`;
  }
  if (tls === 'verify-ca' && rootCert === null)
    return `${tlsParameter.name} ${url.searchParams.get(tlsParameter.name)} needs ${tlsParameter.ca}`;
  if (tls === 'require' && rootCert !== null) tls = 'verify-ca';
  tls ??= rootCert === null ? 'disable' : 'verify';
  if (url.hash !== '') return `url must be ${expected}`;
  const user = decodeURIComponent(url.username);
  return {
    kind,
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? DEFAULT_PORTS[kind] : Number(url.port),
    user,
    password: url.password === '' ? null : decodeURIComponent(url.password),
    database: database === '' ? user : database,
    tls,
    rootCert,
  };
}

/** The URL as answers show it: the password replaced by `***`, everything else as given. */
export function maskTableUrl(text: string): string {
  const url = new URL(text);
  if (url.password === '') return text;
  url.password = 'MASKED';
  return url.toString().replace(':MASKED@', ':***@');
}
