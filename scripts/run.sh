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
bin/worker &
worker=$!
bin/api &
api=$!
stop() { kill -TERM $api $worker 2>/dev/null || true; wait $api $worker 2>/dev/null || true; }
# Ctrl-C or SIGTERM is the normal way to stop: both drain and exit 0.
trap 'stop; exit 0' INT TERM
trap stop EXIT

cat <<MSG

  Tidings is starting: API on http://$HTTP_ADDR, metrics on http://${API_ADMIN_ADDR:-127.0.0.1:9090}/metrics,
  worker admin (asynqmon, read-only) on http://${WORKER_ADMIN_ADDR:-127.0.0.1:8081}/monitoring/
  Mint a dashboard session token:  make token ORG=my-org   (secrets in var/secrets.env)
  Outbox (sent mail as .eml):       $OUTBOX_DIR

MSG
wait -n $api $worker
