#!/usr/bin/env bash
# Events benchmark (docs/benchmarks.md): POST /api/events against bin/api
# with bin/worker running beside it, over many tenants, all local, and the
# same events recorded one per transaction straight on pgx, doing the work
# the api does per event (bench/pgxevents -work fair: the record and the
# sequence engine's hook; no HTTP, auth or rate limit), as the baseline.
# Measurements, in this order, in one run:
#   1. closed loop (CONC workers): the most events/s the stack sustains;
#   2. the pgx baseline (CONC recorders), for the ratio (it needs the
#      contacts that the first loadgen run provisions); with OLD_BASELINE=1
#      also the baseline of earlier runs (-work record: the record
#      statement alone, no transaction, no hook);
#   3. open loop at RATE events/s (at most OPEN_CONC in flight): latency at
#      a fixed arrival rate, measured from each request's scheduled time;
#   4. the pgx baseline again.
# The ratio is the closed loop's median over the mean of the baselines.
# Uses a fresh database on spare loopback ports; stops everything on exit.
#
# Knobs (environment): DURATION (10s), WARMUP (2s), CONC (32), ROUNDS (3),
# RATE (5000), OPEN_CONC (256), TENANTS (50), BENCH_DB (tidings_bench_events), OUT (var/bench),
# LOG_LEVEL (info), KEEP_LOGS (0), OLD_BASELINE (0); the api's INGEST_*
# settings pass through (README "Configuration").
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONC=${CONC:-32}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-5000}
OPEN_CONC=${OPEN_CONC:-256}
TENANTS=${TENANTS:-50}
BENCH_DB=${BENCH_DB:-tidings_bench_events}
OUT=${OUT:-var/bench}
PGADMIN=${PGADMIN:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
export LOG_LEVEL=${LOG_LEVEL:-info}

source bench/lib.sh
export OUTBOX_DIR=$OUT/outbox
echo "building bin/api, bin/worker, bin/loadgen, bin/pgxevents"
go build -o bin/api ./cmd/api
go build -o bin/worker ./cmd/worker
go build -o bin/loadgen ./bench/cmd/loadgen
go build -o bin/pgxevents ./bench/pgxevents

fresh_db

api_port=$(spare_port); admin_port=$(spare_port)
org="evbench_$(date +%s)"
HTTP_ADDR=127.0.0.1:$api_port bin/api 2>"$OUT/events-api.log" &
api_pid=$!; pids+=("$api_pid")
wait_ready "http://127.0.0.1:$api_port/readyz" events-api
WORKER_ADMIN_ADDR=127.0.0.1:$admin_port bin/worker 2>"$OUT/events-worker.log" &
pids+=("$!")
wait_ready "http://127.0.0.1:$admin_port/healthz" events-worker

api=http://127.0.0.1:$api_port
common=(-scenario events -api "$api" -secret "$DASHBOARD_JWT_SECRET" -org "$org" -tenants "$TENANTS"
        -target "api=$api,pid=$api_pid" -d "$DURATION" -warmup "$WARMUP")
pgx=(bin/pgxevents -db "$DATABASE_URL" -org "$org" -c "$CONC" -d "$DURATION" -work fair)

result=$OUT/events.txt
: >"$result"
echo
echo "=== closed loop, $CONC workers, $TENANTS tenants ===" | tee -a "$result"
bin/loadgen "${common[@]}" -c "$CONC" -rounds "$ROUNDS" | tee -a "$result"
baseline() {
  echo
  echo "=== baseline: the api's work per event, one per transaction, straight on pgx (bench/pgxevents -work fair) ===" | tee -a "$result"
  "${pgx[@]}" | tee -a "$result"
}
baseline
if [ "${OLD_BASELINE:-0}" = 1 ]; then
  echo
  echo "=== earlier baseline: the record statement alone (bench/pgxevents -work record) ===" | tee -a "$result"
  bin/pgxevents -db "$DATABASE_URL" -org "$org" -c "$CONC" -d "$DURATION" -work record | tee -a "$result"
fi
echo
echo "=== open loop at $RATE events/s ===" | tee -a "$result"
bin/loadgen "${common[@]}" -c "$OPEN_CONC" -rate "$RATE" -rounds "$ROUNDS" | tee -a "$result"
baseline

api_rate=$(awk '/^closed loop/ {c=1} c && $1 == "api" && $2 == "median" {print $3; exit}' "$result")
mean() { awk -v w="$1" '$1 == w {for (i = 1; i <= NF; i++) if ($i == "rows/s") {s += $(i-1); n++}} END {if (n) printf "%.0f", s / n}' "$result"; }
pgx_rate=$(mean pgx-fair:)
old_rate=$(mean pgx-record:)
echo
echo "closed-loop api median ${api_rate:-?} events/s; pgx baseline (the api's work, one per transaction) mean ${pgx_rate:-?} events/s" | tee -a "$result"
if [ -n "${api_rate:-}" ] && [ -n "${pgx_rate:-}" ]; then
  awk -v a="${api_rate//,/}" -v b="$pgx_rate" 'BEGIN {printf "ratio api/pgx: %.3f\n", a / b}' | tee -a "$result"
fi
if [ -n "${api_rate:-}" ] && [ -n "${old_rate:-}" ]; then
  awk -v a="${api_rate//,/}" -v b="$old_rate" -v f="${pgx_rate:-0}" \
    'BEGIN {printf "earlier baseline (record statement alone) %.0f events/s: ratio api/record %.3f; fair/record %.3f\n", b, a / b, f / b}' | tee -a "$result"
fi
if [ "${KEEP_LOGS:-0}" != 1 ]; then rm -f "$OUT"/events-*.log; fi
echo "results in $result"
