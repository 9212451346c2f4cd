# Shared by the bench/run-*.sh scripts (sourced): the environment every
# benchmark api runs with, a fresh database, process bookkeeping, spare
# loopback ports and readiness waits. Needs OUT, BENCH_DB and PGADMIN set.

export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$BENCH_DB?sslmode=disable"
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
export DASHBOARD_JWT_SECRET=bench-dashboard-secret
export TRACKING_SECRET=bench-tracking-secret
# The secrets above are public and short, and loadgen's tokens carry no
# issuer or audience: only DEV_MODE starts on them (config.Secure). Several
# apis run at once, each with its admin listener on a port of its own.
export DEV_MODE=true
export API_ADMIN_ADDR=127.0.0.1:0
# Huge, so the limiter never refuses a request; at this limit it leases
# 1,000 tokens at a time (one Redis call per 1,000 requests per instance;
# docs/decisions.md, "Request rate limit: leases").
export RATE_LIMIT_PER_MINUTE=100000000
mkdir -p "$OUT" bin

fresh_db() {
  echo "fresh database $BENCH_DB"
  psql "$PGADMIN" -qc "DROP DATABASE IF EXISTS \"$BENCH_DB\" WITH (FORCE)"
  psql "$PGADMIN" -qc "CREATE DATABASE \"$BENCH_DB\""
}

# pids holds what this script started; stop ends all of it.
pids=()
stop() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
# Interrupted: stop and leave, rather than carry on with the next run.
trap stop EXIT
trap 'stop; exit 130' INT TERM

# spare_port prints a loopback port nothing listens on.
spare_port() {
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  echo "no spare port" >&2; return 1
}

wait_ready() { # url name
  for _ in $(seq 200); do
    curl -fs -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "$2 did not become ready; see $OUT/$2.log" >&2; return 1
}
