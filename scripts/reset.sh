#!/usr/bin/env bash
# Drops the development database, flushes the development Redis database and
# empties the outbox: `make run` then starts from nothing. It refuses to touch
# anything but the local development defaults unless RESET_FORCE=1.
set -euo pipefail
cd "$(dirname "$0")/.."

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/tidings?sslmode=disable}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
OUTBOX_DIR=${OUTBOX_DIR:-./var/outbox}
db=$(sed -E 's#.*/([^/?]+)(\?.*)?$#\1#' <<<"$DATABASE_URL")
host=$(sed -E 's#^[a-z]+://([^@/]*@)?([^:/?]+).*#\2#' <<<"$DATABASE_URL")
rhost=$(sed -E 's#^[a-z]+://([^@/]*@)?([^:/?]+).*#\2#' <<<"$REDIS_URL")
case "$host $rhost" in
  "127.0.0.1 127.0.0.1"|"localhost localhost"|"127.0.0.1 localhost"|"localhost 127.0.0.1") ;;
  *) [ "${RESET_FORCE:-}" = 1 ] || { echo "reset: $DATABASE_URL / $REDIS_URL are not local; set RESET_FORCE=1 to reset them anyway"; exit 1; } ;;
esac
if [ -t 0 ] && [ "${RESET_YES:-}" != 1 ]; then
  read -r -p "Drop database $db, flush $REDIS_URL and empty $OUTBOX_DIR? [y/N] " ok
  [ "$ok" = y ] || [ "$ok" = Y ] || { echo "nothing changed"; exit 1; }
fi
admin=${DATABASE_URL%/*}/postgres
psql "$admin" -qc "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)"
redis-cli -u "$REDIS_URL" FLUSHDB >/dev/null
rm -rf "$OUTBOX_DIR"
echo "reset: database $db dropped, $REDIS_URL flushed, $OUTBOX_DIR removed; make run starts afresh"
