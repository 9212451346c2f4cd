#!/usr/bin/env bash
# Makes sure PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) answer:
# start them if they are installed but stopped, install them as a last resort.
set -euo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null || (command -v psql >/dev/null && psql -h 127.0.0.1 -U postgres -tAc 'select 1' >/dev/null 2>&1); }
redis_up() { command -v redis-cli >/dev/null && [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; }

apt_install() {
  echo "installing $* with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "$@" >/dev/null
}

wait_for() {
  local what=$1 check=$2
  for _ in $(seq 1 60); do
    if $check; then return 0; fi
    sleep 0.5
  done
  echo "$what did not come up" >&2
  return 1
}

if ! pg_up; then
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    apt_install postgresql postgresql-client
    ver=$(ls /etc/postgresql | sort -V | tail -n1)
    # Trust local TCP connections for the postgres user, as the machine's
    # own setup does.
    sed -i 's/^\(host\s\+all\s\+all\s\+127.0.0.1\/32\s\+\).*/\1trust/' /etc/postgresql/$ver/main/pg_hba.conf
    sed -i 's/^\(host\s\+all\s\+all\s\+::1\/128\s\+\).*/\1trust/' /etc/postgresql/$ver/main/pg_hba.conf
  fi
  echo "starting PostgreSQL" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main start || true
  wait_for PostgreSQL pg_up
fi

if ! redis_up; then
  command -v redis-server >/dev/null || apt_install redis-server
  echo "starting Redis" >&2
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  wait_for Redis redis_up
fi

# Node runs the official MJML compiler.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt_install nodejs npm
fi
