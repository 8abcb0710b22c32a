#!/bin/bash
# The streaming replica: on first start, a base backup of the primary with its recovery settings
# (pg_basebackup --write-recovery-conf); then PostgreSQL as a hot standby, following the primary.
set -euo pipefail
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_basebackup --host=postgres --username=replicator --pgdata="$PGDATA" \
    --write-recovery-conf --wal-method=stream --checkpoint=fast; do
    echo 'primary not ready for a base backup; retrying' >&2
    rm -rf "${PGDATA:?}"/*
    sleep 2
  done
  chmod 0700 "$PGDATA"
fi
exec postgres -c hot_standby=on
