#!/usr/bin/env bash
# What the tests need on this machine, run by `npm test` before the build: PostgreSQL 15+ on
# 127.0.0.1:5432 (postgres, trust), NATS with JetStream on 127.0.0.1:4222, MariaDB on 127.0.0.1:3306
# (root, empty password), promtool and Debian's chromium. Silent when all are there; otherwise it
# installs (Debian's packages) and starts what is missing, which takes root, or says what to do.
# TEST_DATABASE_URL / TEST_NATS_URL point the tests at servers elsewhere: then the local ones are
# not needed. TEST_SERVICES_DRY_RUN=1 says what would be done and does nothing.
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
[ -n "${TEST_NATS_URL:-}" ] || nats_ok || wanted+=(nats)
mariadb_ok || wanted+=(mariadb)
promtool_ok || wanted+=(promtool)
chromium_ok || wanted+=(chromium)
[ ${#wanted[@]} -eq 0 ] && exit 0

# The Debian package behind each need, when its program is absent.
packages=()
for need in "${wanted[@]}"; do
  case $need in
    postgres) has pg_ctlcluster || packages+=(postgresql) ;;
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
  say "  apt-get install postgresql nats-server mariadb-server prometheus chromium (as root), then"
  say "  PostgreSQL on 127.0.0.1:5432 with trust auth for user postgres on loopback,"
  say "  nats-server -a 127.0.0.1 -p 4222 -js,"
  say "  MariaDB on 127.0.0.1:3306 where root logs in with an empty password,"
  say "  promtool on PATH and /usr/bin/chromium."
  say "  (TEST_DATABASE_URL and TEST_NATS_URL name servers elsewhere instead of the local ones.)"
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
    nats) nats_ok || start_nats || cannot "get NATS to answer on 127.0.0.1:4222" ;;
    mariadb) mariadb_ok || start_mariadb || cannot "get MariaDB to take root on 127.0.0.1:3306" ;;
    promtool) promtool_ok || cannot "find promtool after installing prometheus" ;;
    chromium) chromium_ok || cannot "find /usr/bin/chromium after installing chromium" ;;
  esac
done
say "ready: ${wanted[*]}"
