#!/usr/bin/env bash
# What the tests need on this machine, run by `npm test` before the build: PostgreSQL 15+ on
# 127.0.0.1:5432 (postgres, trust), a hot-standby replica of it streaming on 127.0.0.1:5433 (the
# cluster menu_sync_replica, made with pg_basebackup), PgBouncer in transaction mode on
# 127.0.0.1:6432 in front of it (every database, user postgres, no password), NATS with JetStream on 127.0.0.1:4222,
# MariaDB on 127.0.0.1:3306 (root, empty password), promtool and Debian's chromium. Silent when all
# are there; otherwise it installs (Debian's packages) and starts what is missing, which takes
# root, or says what to do. TEST_DATABASE_URL / TEST_READ_DATABASE_URL / TEST_NATS_URL point the
# tests at servers elsewhere: then the local ones are not needed. TEST_SERVICES_DRY_RUN=1 says
# what would be done and does nothing.
set -uo pipefail

say() { printf '[test services] %s\n' "$*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

has() { command -v "$1" >/dev/null 2>&1; }

# Each *_ok answers whether the tests can use the thing as it is; the client checks run only where
# the client is installed (a server in a container next door is as good).
postgres_ok() {
  port_open 5432 || return 1
  has psql || return 0
  psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -w -Atqc 'SELECT 1' >/dev/null 2>&1
}
# The replica answers on 5433, in recovery and streaming from the primary.
REPLICA_CLUSTER=menu_sync_replica
REPLICA_PORT=5433
replica_ok() {
  port_open $REPLICA_PORT || return 1
  has psql || return 0
  [ "$(psql -h 127.0.0.1 -p $REPLICA_PORT -U postgres -d postgres -w -Atqc "SELECT pg_is_in_recovery()
     AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')" 2>/dev/null)" = t ]
}
# PgBouncer answers on 6432 and hands a statement to PostgreSQL.
POOLER_PORT=6432
POOLER_DIR=/run/menu-sync-pgbouncer
pooler_ok() {
  port_open $POOLER_PORT || return 1
  has psql || return 0
  psql -h 127.0.0.1 -p $POOLER_PORT -U postgres -d postgres -w -Atqc 'SELECT 1' >/dev/null 2>&1
}
nats_ok() { port_open 4222; }
mariadb_ok() {
  port_open 3306 || return 1
  has mariadb || return 0
  mariadb -h 127.0.0.1 -P 3306 -u root --password= --connect-timeout=5 -e 'SELECT 1' >/dev/null 2>&1
}
promtool_ok() { has promtool; }
chromium_ok() { [ -x /usr/bin/chromium ]; }

wanted=()
[ -n "${TEST_DATABASE_URL:-}" ] || postgres_ok || wanted+=(postgres)
[ -n "${TEST_DATABASE_URL:-}${TEST_READ_DATABASE_URL:-}" ] || replica_ok || wanted+=(replica)
[ -n "${TEST_DATABASE_URL:-}${TEST_POOLER_DATABASE_URL:-}" ] || pooler_ok || wanted+=(pooler)
[ -n "${TEST_NATS_URL:-}" ] || nats_ok || wanted+=(nats)
mariadb_ok || wanted+=(mariadb)
promtool_ok || wanted+=(promtool)
chromium_ok || wanted+=(chromium)
[ ${#wanted[@]} -eq 0 ] && exit 0

# The Debian package behind each need, when its program is absent.
packages=()
for need in "${wanted[@]}"; do
  case $need in
    postgres | replica) has pg_ctlcluster || packages+=(postgresql) ;;
    pooler) [ -x /usr/sbin/pgbouncer ] || packages+=(pgbouncer) ;;
    nats) [ -x /usr/sbin/nats-server ] || packages+=(nats-server) ;;
    mariadb) [ -x /usr/sbin/mariadbd ] || packages+=(mariadb-server mariadb-client) ;;
    promtool) packages+=(prometheus) ;;
    chromium) packages+=(chromium) ;;
  esac
done

say "not ready: ${wanted[*]}"
if [ -n "${TEST_SERVICES_DRY_RUN:-}" ]; then
  [ ${#packages[@]} -eq 0 ] || say "would install: ${packages[*]}"
  say "would start or configure: ${wanted[*]}"
  exit 0
fi

cannot() {
  say "cannot $1. What the tests need:"
  say "  apt-get install postgresql pgbouncer nats-server mariadb-server prometheus chromium (as root), then"
  say "  PostgreSQL on 127.0.0.1:5432 with trust auth for user postgres on loopback,"
  say "  a hot-standby replica of it on 127.0.0.1:$REPLICA_PORT (pg_basebackup -R), trust on loopback,"
  say "  PgBouncer on 127.0.0.1:$POOLER_PORT, pool_mode = transaction, in front of 127.0.0.1:5432 (user postgres, no password),"
  say "  nats-server -a 127.0.0.1 -p 4222 -js,"
  say "  MariaDB on 127.0.0.1:3306 where root logs in with an empty password,"
  say "  promtool on PATH and /usr/bin/chromium."
  say "  (TEST_DATABASE_URL, TEST_READ_DATABASE_URL, TEST_POOLER_DATABASE_URL and TEST_NATS_URL name servers elsewhere instead of the local ones.)"
  exit 1
}
[ "$(id -u)" -eq 0 ] || cannot "set up ${wanted[*]} without root (run npm test once as root, or set them up by hand)"

if [ ${#packages[@]} -gt 0 ]; then
  has apt-get || cannot "install ${packages[*]}: no apt-get (this is not Debian or a derivative)"
  say "installing ${packages[*]} (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  # A failed update still leaves the lists and cached packages that may do.
  apt-get update -qq -o DPkg::Lock::Timeout=300 >/dev/null || say "apt-get update failed; trying the lists at hand"
  apt_log=$(mktemp)
  if ! apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "${packages[@]}" >"$apt_log" 2>&1; then
    tail -n 20 "$apt_log" >&2
    rm -f "$apt_log"
    cannot "install ${packages[*]} with apt-get"
  fi
  rm -f "$apt_log"
fi

# wait_for SECONDS COMMAND...: true as soon as the command is.
wait_for() {
  local seconds=$1
  shift
  for _ in $(seq 1 "$seconds"); do "$@" && return 0; sleep 1; done
  "$@"
}

start_postgres() {
  pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null || {
    local version
    version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
    if [ -z "$version" ]; then
      version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
      say "creating the PostgreSQL $version cluster"
      pg_createcluster "$version" main >/dev/null || return 1
    fi
    say "starting PostgreSQL $version"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    wait_for 30 pg_isready -h 127.0.0.1 -p 5432 -q || return 1
  }
  postgres_ok && return 0
  # Tests connect as postgres over TCP without a password: trust on loopback only.
  local hba
  hba=$(su postgres -c "psql -Atqc 'SHOW hba_file'" 2>/dev/null)
  [ -n "$hba" ] || return 1
  say "allowing trust auth on loopback in $hba"
  sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  su postgres -c "psql -Atqc 'SELECT pg_reload_conf()'" >/dev/null
  wait_for 10 postgres_ok
}

primary_sql() { psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -w -Atqc "$1"; }

# Lets the primary (Debian cluster $1/$2) stream to a standby over loopback: wal_level, WAL
# senders and slots (a restart when one must change), a replication line in its pg_hba.conf, and a
# cap on the WAL a slot may hold back, so that a replica left stopped cannot fill the disk (past
# the cap its slot is dropped, and the replica is made again on the next run).
allow_replication() {
  local restart='' hba
  [ "$(primary_sql 'SHOW wal_level')" != minimal ] || { primary_sql 'ALTER SYSTEM SET wal_level = replica' && restart=1; }
  [ "$(primary_sql 'SHOW max_wal_senders')" -ge 2 ] || { primary_sql 'ALTER SYSTEM SET max_wal_senders = 10' && restart=1; }
  [ "$(primary_sql 'SHOW max_replication_slots')" -ge 1 ] ||
    { primary_sql 'ALTER SYSTEM SET max_replication_slots = 10' && restart=1; }
  [ "$(primary_sql 'SHOW max_slot_wal_keep_size')" != -1 ] ||
    primary_sql "ALTER SYSTEM SET max_slot_wal_keep_size = '4GB'" || return 1
  hba=$(primary_sql 'SHOW hba_file')
  [ -n "$hba" ] || return 1
  if ! grep -Eq '^host\s+replication\s+all\s+127\.0\.0\.1/32\s+trust' "$hba"; then
    say "allowing replication connections on loopback in $hba"
    sed -i '1i host replication all 127.0.0.1/32 trust' "$hba"
  fi
  primary_sql 'SELECT pg_reload_conf()' >/dev/null || return 1
  [ -z "$restart" ] && return 0
  say "restarting PostgreSQL $1/$2 for replication"
  pg_ctlcluster --skip-systemctl-redirect "$1" "$2" restart && wait_for 30 postgres_ok
}

# The replica is a cluster of the primary's version (postgresql-common), its data directory a
# pg_basebackup of the primary with -R (standby.signal, primary_conninfo) streaming through a
# replication slot of its name. One that exists is started; one that does not stream within 30 s
# (its WAL gone, another primary) is dropped and made again.
start_replica() {
  local version cluster conf data
  read -r version cluster < <(pg_lsclusters -h 2>/dev/null | awk '$3 == 5432 { print $1, $2; exit }')
  if [ -z "$version" ]; then
    say "no cluster of postgresql-common listens on 5432 to make the replica from"
    return 1
  fi
  conf=/etc/postgresql/$version/$REPLICA_CLUSTER
  if [ -d "$conf" ]; then
    say "starting the replica $version/$REPLICA_CLUSTER"
    pg_ctlcluster --skip-systemctl-redirect "$version" $REPLICA_CLUSTER start 2>/dev/null
    wait_for 30 replica_ok && return 0
    say "the replica does not stream from the primary: making it again"
    pg_dropcluster --stop "$version" $REPLICA_CLUSTER || return 1
  fi
  if port_open $REPLICA_PORT; then
    say "127.0.0.1:$REPLICA_PORT is taken by a server that is not the replica"
    return 1
  fi
  allow_replication "$version" "$cluster" || return 1
  say "making the replica $version/$REPLICA_CLUSTER on port $REPLICA_PORT (pg_basebackup of the primary)"
  pg_createcluster "$version" $REPLICA_CLUSTER -p $REPLICA_PORT >/dev/null || return 1
  data=/var/lib/postgresql/$version/$REPLICA_CLUSTER
  # A hot standby needs these at least as high as on its primary.
  {
    echo "listen_addresses = 'localhost'"
    echo "port = $REPLICA_PORT"
    echo 'hot_standby = on'
    for name in max_connections max_worker_processes max_wal_senders max_prepared_transactions max_locks_per_transaction; do
      echo "$name = $(primary_sql "SHOW $name")"
    done
  } >"$conf/conf.d/90-menu-sync-replica.conf"
  sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$conf/pg_hba.conf"
  primary_sql "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                WHERE slot_name = '$REPLICA_CLUSTER' AND NOT active" >/dev/null
  rm -rf "$data" && install -d -o postgres -g postgres -m 700 "$data" || return 1
  su postgres -c "/usr/lib/postgresql/$version/bin/pg_basebackup -h 127.0.0.1 -p 5432 -U postgres -D '$data' \
    -R -X stream -C -S $REPLICA_CLUSTER -c fast" || return 1
  pg_ctlcluster --skip-systemctl-redirect "$version" $REPLICA_CLUSTER start || return 1
  wait_for 60 replica_ok
}

# PgBouncer as the postgres user (it refuses root), its config, auth file, pid file and log in
# $POOLER_DIR, written again at each start: transaction pooling of every database to the local
# PostgreSQL, where postgres logs in with trust on loopback, so the auth file names postgres with no
# password. Many small pools: every test database is a pool of its own.
start_pooler() {
  say "starting PgBouncer (transaction pooling) on 127.0.0.1:$POOLER_PORT"
  install -d -o postgres -g postgres -m 700 $POOLER_DIR || return 1
  printf '"postgres" ""\n' >$POOLER_DIR/userlist.txt
  cat >$POOLER_DIR/pgbouncer.ini <<EOF_INI
[databases]
* = host=127.0.0.1 port=5432
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $POOLER_PORT
unix_socket_dir =
auth_type = trust
admin_users = postgres
auth_file = $POOLER_DIR/userlist.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 20
max_db_connections = 40
server_idle_timeout = 30
ignore_startup_parameters = extra_float_digits
pidfile = $POOLER_DIR/pgbouncer.pid
logfile = $POOLER_DIR/pgbouncer.log
EOF_INI
  chown postgres:postgres $POOLER_DIR/userlist.txt $POOLER_DIR/pgbouncer.ini
  su postgres -s /bin/sh -c "/usr/sbin/pgbouncer -d -q $POOLER_DIR/pgbouncer.ini" || return 1
  wait_for 30 pooler_ok
}

start_nats() {
  say "starting nats-server with JetStream"
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_for 30 nats_ok
}

start_mariadb() {
  if ! port_open 3306; then
    say "starting MariaDB"
    # /run is emptied at boot; the socket and pid file live there. Debian's own config may leave
    # out `user`, and mariadbd refuses to run as root.
    install -d -o mysql -g mysql /run/mysqld
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
    wait_for 60 port_open 3306 || return 1
  fi
  mariadb_ok && return 0
  # Debian's root logs in through the unix socket only; the tests log in over TCP, no password.
  say "letting root log in to MariaDB over 127.0.0.1 with an empty password"
  mariadb -u root --protocol=socket -e "
    ALTER USER root@localhost IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
    CREATE USER IF NOT EXISTS root@'127.0.0.1' IDENTIFIED BY '';
    GRANT ALL PRIVILEGES ON *.* TO root@'127.0.0.1' WITH GRANT OPTION;
    FLUSH PRIVILEGES;" || return 1
  mariadb_ok
}

for need in "${wanted[@]}"; do
  case $need in
    postgres) postgres_ok || start_postgres || cannot "get PostgreSQL to answer on 127.0.0.1:5432" ;;
    replica) replica_ok || start_replica || cannot "get a replica of the primary streaming on 127.0.0.1:$REPLICA_PORT" ;;
    pooler) pooler_ok || start_pooler || cannot "get PgBouncer to answer on 127.0.0.1:$POOLER_PORT" ;;
    nats) nats_ok || start_nats || cannot "get NATS to answer on 127.0.0.1:4222" ;;
    mariadb) mariadb_ok || start_mariadb || cannot "get MariaDB to take root on 127.0.0.1:3306" ;;
    promtool) promtool_ok || cannot "find promtool after installing prometheus" ;;
    chromium) chromium_ok || cannot "find /usr/bin/chromium after installing chromium" ;;
  esac
done
say "ready: ${wanted[*]}"
