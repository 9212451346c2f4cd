#!/usr/bin/env bash
# Sustained load over the rate limit (issue 15, docs/benchmarks.md "Load"):
# TENANTS tenants (50) each sending POST /api/events at OVER (4) times
# RATE_LIMIT_PER_MINUTE (100), open loop, for DURATION (5m), against bin/api
# with bin/worker beside it. It reports the statuses (only 2xx and 429 are
# allowed: any other status fails the script), latency percentiles, and
# the resident memory of both processes every SAMPLE (30s) from start to
# end, so a leak shows as a climb.
#
# Knobs (environment): DURATION (5m), TENANTS (50), OVER (4), LIMIT (100),
# SAMPLE (30), OPEN_CONC (256), BENCH_DB (tidings_bench_load), OUT (var/bench).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5m}
TENANTS=${TENANTS:-50}
OVER=${OVER:-4}
LIMIT=${LIMIT:-100}
SAMPLE=${SAMPLE:-30}
OPEN_CONC=${OPEN_CONC:-256}
BENCH_DB=${BENCH_DB:-tidings_bench_load}
OUT=${OUT:-var/bench}
PGADMIN=${PGADMIN:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
export LOG_LEVEL=${LOG_LEVEL:-warn}

source bench/lib.sh
# lib.sh turns the limiter off; this load is about the limiter.
export RATE_LIMIT_PER_MINUTE=$LIMIT
export OUTBOX_DIR=$OUT/outbox
echo "building bin/api, bin/worker, bin/loadgen"
go build -o bin/api ./cmd/api
go build -o bin/worker ./cmd/worker
go build -o bin/loadgen ./bench/cmd/loadgen
fresh_db

api_port=$(spare_port); admin_port=$(spare_port)
HTTP_ADDR=127.0.0.1:$api_port bin/api 2>"$OUT/load-api.log" &
api_pid=$!; pids+=("$api_pid")
wait_ready "http://127.0.0.1:$api_port/readyz" load-api
WORKER_ADMIN_ADDR=127.0.0.1:$admin_port bin/worker 2>"$OUT/load-worker.log" &
worker_pid=$!; pids+=("$worker_pid")
wait_ready "http://127.0.0.1:$admin_port/healthz" load-worker

rss() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
rate=$(awk -v t="$TENANTS" -v o="$OVER" -v l="$LIMIT" 'BEGIN {printf "%.2f", t * o * l / 60}')
result=$OUT/load.txt
: >"$result"
echo "=== $TENANTS tenants at $OVER x $LIMIT requests/min each: $rate requests/s for $DURATION ===" | tee -a "$result"
echo "rss MiB at start: api $(rss "$api_pid"), worker $(rss "$worker_pid")" | tee -a "$result"
(
  while sleep "$SAMPLE"; do
    echo "rss MiB at +$((SECONDS))s: api $(rss "$api_pid"), worker $(rss "$worker_pid")" | tee -a "$result"
  done
) &
sampler=$!
SECONDS=0
bin/loadgen -scenario events -api "http://127.0.0.1:$api_port" -secret "$DASHBOARD_JWT_SECRET" \
  -org "load_$(date +%s)" -tenants "$TENANTS" -target "api=http://127.0.0.1:$api_port,pid=$api_pid" \
  -rate "$rate" -c "$OPEN_CONC" -d "$DURATION" -warmup 0s -rounds 1 | tee -a "$result"
kill "$sampler" 2>/dev/null || true
echo "rss MiB at end: api $(rss "$api_pid"), worker $(rss "$worker_pid")" | tee -a "$result"
if [ "${KEEP_LOGS:-0}" != 1 ]; then rm -f "$OUT"/load-*.log; fi
bad=$(awk '/^statuses:/ {for (i = 2; i <= NF; i++) {split($i, kv, "="); if (kv[1] !~ /^2/ && kv[1] != "429") print $i}}' "$result")
if [ -n "$bad" ]; then
  echo "FAIL: statuses other than 2xx and 429: $bad" | tee -a "$result"
  exit 1
fi
echo "only 2xx and 429; results in $result"
