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

/** TLS of the connection: off, encrypted without checking the certificate, or verified against the host name. */
export type TableTls = 'disable' | 'require' | 'verify';

/** A target database as its URL names it. */
export interface TableTarget {
  kind: TableSinkKind;
  host: string;
  port: number;
  user: string;
  password: string | null;
  database: string;
  tls: TableTls;
}

const PROTOCOLS: Record<string, TableSinkKind> = {
  'postgres:': 'postgres',
  'postgresql:': 'postgres',
  'mysql:': 'mysql',
};
const DEFAULT_PORTS: Record<TableSinkKind, number> = { postgres: 5432, mysql: 3306 };
const TLS_PARAMETERS: Record<TableSinkKind, { name: string; values: Record<string, TableTls> }> = {
  postgres: { name: 'sslmode', values: { disable: 'disable', require: 'require', 'verify-full': 'verify' } },
  mysql: { name: 'ssl-mode', values: { DISABLED: 'disable', REQUIRED: 'require', VERIFY_IDENTITY: 'verify' } },
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
  let tls: TableTls = 'disable';
  for (const [name, value] of url.searchParams) {
    if (name !== tlsParameter.name || tlsParameter.values[value] === undefined)
      return `url may only carry ${tlsParameter.name}=${Object.keys(tlsParameter.values).join('|')} as a parameter`;
    tls = tlsParameter.values[value];
  }
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
  };
}

/** The URL as answers show it: the password replaced by `***`, everything else as given. */
export function maskTableUrl(text: string): string {
  const url = new URL(text);
  if (url.password === '') return text;
  url.password = 'MASKED';
  return url.toString().replace(':MASKED@', ':***@');
}
