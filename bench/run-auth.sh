#!/usr/bin/env bash
# HTTP benchmark of the authentication middleware (docs/benchmarks.md):
# authenticated GET /api/api-keys on bin/api against the same handler served
# bare (bench/bare), back to back, plus a static-JSON pair for context. A
# second api with API_KEY_CACHE_TTL=0 (one Postgres lookup per request, as
# before the key cache) runs beside it, so the cache's effect is measured
# under the same conditions. Runs once with the api at LOG_LEVEL=warn and
# once at the default info level, against a fresh database, on spare
# loopback ports; stops everything it started on exit.
#
# Knobs (environment): DURATION (5s), WARMUP (1s), CONC (16), ROUNDS (5),
# LEVELS ("warn info"), SCENARIOS ("apikeys healthz"), BENCH_DB
# (tidings_bench), OUT (var/bench), KEEP_LOGS (0), COMPARE_REF (none: a git
# commit whose bin/api runs beside this one as target api-ref, in the same
# rounds, for before/after figures on a busy machine).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
CONC=${CONC:-16}
ROUNDS=${ROUNDS:-5}
LEVELS=${LEVELS:-warn info}
SCENARIOS=${SCENARIOS:-apikeys healthz}
BENCH_DB=${BENCH_DB:-tidings_bench}
OUT=${OUT:-var/bench}
PGADMIN=${PGADMIN:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}

source bench/lib.sh
echo "building bin/api, bin/bare, bin/loadgen"
go build -o bin/api ./cmd/api
go build -o bin/bare ./bench/bare
go build -o bin/loadgen ./bench/cmd/loadgen
if [ -n "${COMPARE_REF:-}" ]; then
  echo "building bin/api-ref from $COMPARE_REF"
  ref_src=$(mktemp -d)
  git archive "$COMPARE_REF" | tar -x -C "$ref_src"
  (cd "$ref_src" && go build -o "$OLDPWD/bin/api-ref" ./cmd/api)
  rm -rf "$ref_src"
fi

fresh_db

for level in $LEVELS; do
  api_port=$(spare_port); nocache_port=$(spare_port); bare_port=$(spare_port)
  org="bench_${level}_$(date +%s)"
  echo
  echo "=== api LOG_LEVEL=$level (api :$api_port, api-nocache :$nocache_port, bare :$bare_port, org $org) ==="
  # Logs go to a file, as they would to a collector: writing them is part
  # of the cost being measured.
  HTTP_ADDR=127.0.0.1:$api_port LOG_LEVEL=$level bin/api 2>"$OUT/api-$level.log" &
  api_pid=$!; pids+=("$api_pid")
  wait_ready "http://127.0.0.1:$api_port/readyz" "api-$level"
  HTTP_ADDR=127.0.0.1:$nocache_port LOG_LEVEL=$level API_KEY_CACHE_TTL=0 MIGRATE=false \
    bin/api 2>"$OUT/api-nocache-$level.log" &
  nocache_pid=$!; pids+=("$nocache_pid")
  wait_ready "http://127.0.0.1:$nocache_port/readyz" "api-nocache-$level"
  if [ -n "${COMPARE_REF:-}" ]; then
    ref_port=$(spare_port)
    HTTP_ADDR=127.0.0.1:$ref_port LOG_LEVEL=$level MIGRATE=false bin/api-ref 2>"$OUT/api-ref-$level.log" &
    ref_pid=$!; pids+=("$ref_pid")
    wait_ready "http://127.0.0.1:$ref_port/readyz" "api-ref-$level"
  fi
  LOG_LEVEL=warn bin/bare -addr "127.0.0.1:$bare_port" -tenant "$org" 2>"$OUT/bare-$level.log" &
  bare_pid=$!; pids+=("$bare_pid")
  wait_ready "http://127.0.0.1:$bare_port/healthz" "bare-$level"

  common=(-api "http://127.0.0.1:$api_port" -secret "$DASHBOARD_JWT_SECRET" -org "$org"
          -c "$CONC" -d "$DURATION" -warmup "$WARMUP" -rounds "$ROUNDS")
  for scenario in $SCENARIOS; do
    targets=(-target "api=http://127.0.0.1:$api_port,pid=$api_pid")
    if [ "$scenario" = apikeys ]; then
      targets+=(-target "api-nocache=http://127.0.0.1:$nocache_port,pid=$nocache_pid")
      if [ -n "${COMPARE_REF:-}" ]; then
        targets+=(-target "api-ref=http://127.0.0.1:$ref_port,pid=$ref_pid")
      fi
    fi
    targets+=(-target "bare=http://127.0.0.1:$bare_port,pid=$bare_pid")
    echo
    bin/loadgen -scenario "$scenario" "${common[@]}" "${targets[@]}" | tee "$OUT/$scenario-$level.txt"
  done
  stop
done
# A request log at info level grows by hundreds of MB a run: keep the logs
# only when asked (a failed run exits above and keeps them).
if [ "${KEEP_LOGS:-0}" != 1 ]; then rm -f "$OUT"/*.log; fi
echo
echo "results in $OUT/"
