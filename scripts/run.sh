#!/usr/bin/env bash
# Starts the api and the worker against the local PostgreSQL and Redis with
# development defaults; Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/tidings?sslmode=disable}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
# Loopback only: the stack runs on development secrets and an outbox.
export HTTP_ADDR=${HTTP_ADDR:-127.0.0.1:8080}
# TRACKING_SECRET, DASHBOARD_JWT_SECRET and the HS256 issuer and audience,
# random, made once in var/secrets.env and reused, so that tracking links
# verify in both processes and across restarts and make token's sessions
# keep working. Nothing here needs DEV_MODE.
eval "$(scripts/dev-secrets.sh)"
# MAILPIT=1: every message goes over SMTP to a local mail catcher with a
# web page (Mailpit: SMTP on 127.0.0.1:1025, the page on
# http://127.0.0.1:8025), started here when its binary is found
# (MAILPIT_BIN, var/bin/mailpit from make mailpit, or mailpit on PATH),
# else used if something already listens on 1025 (docker run ... axllent/mailpit).
mailpit_pid=
if [ "${MAILPIT:-}" = 1 ]; then
  export EMAIL_PROVIDER=smtp
  export SMTP_URL=${SMTP_URL:-smtp://127.0.0.1:1025?tls=none}
  bin=${MAILPIT_BIN:-}
  [ -z "$bin" ] && [ -x var/bin/mailpit ] && bin=var/bin/mailpit
  [ -z "$bin" ] && bin=$(command -v mailpit || true)
  if [ -n "$bin" ]; then
    echo "starting the mail catcher: $bin (SMTP 127.0.0.1:1025, web page http://127.0.0.1:8025)"
    "$bin" --smtp 127.0.0.1:1025 --listen 127.0.0.1:8025 >var/mailpit.log 2>&1 &
    mailpit_pid=$!
  elif ! (exec 3<>/dev/tcp/127.0.0.1/1025) 2>/dev/null; then
    echo "MAILPIT=1: no mail catcher on 127.0.0.1:1025 and no mailpit binary." >&2
    echo "  make mailpit   (installs it into var/bin), or" >&2
    echo "  docker run -d --name mailpit -p 127.0.0.1:1025:1025 -p 127.0.0.1:8025:8025 axllent/mailpit" >&2
    exit 1
  fi
fi
export EMAIL_PROVIDER=${EMAIL_PROVIDER:-outbox}
export OUTBOX_DIR=${OUTBOX_DIR:-./var/outbox}
export LOG_FORMAT=${LOG_FORMAT:-text}
mkdir -p "$OUTBOX_DIR"

# Create the database if it does not exist; the api applies migrations.
db=$(sed -E 's#.*/([^/?]+)(\?.*)?$#\1#' <<<"$DATABASE_URL")
admin=${DATABASE_URL%/*}/postgres
if ! psql "$admin" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
  echo "creating database $db"
  psql "$admin" -qc "CREATE DATABASE \"$db\""
fi

# bin/worker runs every role (WORKER_ROLES, default all; docs/operations.md).
# Started first, it waits (one log line) until the api has applied the
# migrations, then starts its queues and the scheduler.
echo "starting the worker and the api (the api applies the migrations; the worker waits for them)"
bin/worker &
worker=$!
bin/api &
api=$!
stop() {
  kill -TERM $api $worker $mailpit_pid 2>/dev/null || true
  wait $api $worker $mailpit_pid 2>/dev/null || true
}
# Ctrl-C or SIGTERM is the normal way to stop: both drain and exit 0.
trap 'stop; exit 0' INT TERM
trap stop EXIT

cat <<MSG

  Tidings is starting: API on http://$HTTP_ADDR, metrics on http://${API_ADMIN_ADDR:-127.0.0.1:9090}/metrics,
  worker admin (asynqmon, read-only) on http://${WORKER_ADMIN_ADDR:-127.0.0.1:8081}/monitoring/
  Mint a dashboard session token:  make token ORG=my-org   (secrets in var/secrets.env)
  $(if [ "$EMAIL_PROVIDER" = smtp ] && [ "${MAILPIT:-}" = 1 ]; then
      echo "Mail catcher (every message):   http://127.0.0.1:8025"
    else
      echo "Outbox (sent mail as .eml):       $OUTBOX_DIR   (MAILPIT=1 make run: a web page instead)"
    fi)

MSG
wait -n $api $worker
