import type { ColumnKind } from './table-columns.js';

/** How each kind of column is typed in a PostgreSQL target. */
export const PG_TYPES: Record<ColumnKind, string> = {
  text: 'text',
  integer: 'bigint',
  boolean: 'boolean',
  number: 'double precision',
  timestamp: 'timestamptz',
  json: 'jsonb',
};

/** How each kind of column is typed in a MySQL or MariaDB target (keys and text aside: see the clients). */
export const MYSQL_TYPES: Record<ColumnKind, string> = {
  text: 'LONGTEXT',
  integer: 'BIGINT',
  boolean: 'BOOLEAN',
  number: 'DOUBLE',
  timestamp: 'DATETIME(3)',
  json: 'JSON',
};
