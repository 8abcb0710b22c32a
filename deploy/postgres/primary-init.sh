#!/bin/bash
# Runs once, when the primary's data directory is made (/docker-entrypoint-initdb.d): a role the
# replica streams with, allowed to connect for replication.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" --set password="$REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD :'password';
SQL
echo 'host replication replicator all scram-sha-256' >>"$PGDATA/pg_hba.conf"
