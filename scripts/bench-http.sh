#!/usr/bin/env bash
# Durable connects over HTTP against the HTTP stack's own ceiling, loaded by
# the same tool in the same run. Each round starts:
#   ceiling  `deskbroker-devbench ceiling-server`: a trivial axum JSON handler
#            on the connect route, same runtime, no state, no writes;
#   broker   `deskbroker serve` on a fresh durable SQLite store
#            (synchronous=FULL) in a temporary directory on disk, with a
#            BreadthFirst pool of HOSTS hosts (no session limit), loaded with
#            connects of distinct users — every answer waits for its fsync;
#   baseline the same as broker with BASELINE_BIN (another build, e.g. the
#            previous commit's), only when BASELINE_BIN is set;
# and loads each with `wrk -tTHREADS -cCONNECTIONS -dDURATIONs` (installed
# from Debian when missing). It prints one row per run and, per round, the
# broker's throughput as a ratio of the ceiling's. `cpu_us` is the server's
# own CPU time (user + system, from /proc) per request answered during the
# load: what each answer costs, apart from the load tool's share of the
# same cores. `wr_bytes` is what the server wrote to disk (from
# /proc/PID/io: the store's WAL and checkpoints) per request. Everything on
# loopback.
#
# Environment: BIN (default target/release/deskbroker, built when it is the
# default), DEVBENCH (default target/release/deskbroker-devbench, the
# development benchmarks, built when it is the default), BASELINE_BIN,
# HOSTS (1000), THREADS (2), CONNECTIONS (64), DURATION (seconds, 10),
# ROUNDS (3), DATA_PARENT (directory for the stores, default the system's
# temporary directory: use a disk, not tmpfs).
set -euo pipefail
cd "$(dirname "$0")/.."

HOSTS=${HOSTS:-1000} THREADS=${THREADS:-2} CONNECTIONS=${CONNECTIONS:-64}
DURATION=${DURATION:-10} ROUNDS=${ROUNDS:-3}
if [ -z "${BIN:-}" ]; then
  cargo build --release -p deskbroker
  BIN=target/release/deskbroker
fi
if [ -z "${DEVBENCH:-}" ]; then
  cargo build --release -p devbench
  DEVBENCH=target/release/deskbroker-devbench
fi
if ! command -v wrk >/dev/null; then
  sudo=(); [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get install -y wrk || { "${sudo[@]}" apt-get update && "${sudo[@]}" apt-get install -y wrk; }
fi

work=$(mktemp -d "${DATA_PARENT:-${TMPDIR:-/tmp}}/bench-http.XXXXXX")
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
token=$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 48)

# Starts "$@" (which prints its ready line, `ready {"api":"http://ADDR"}`),
# sets pid and url.
start() {
  local log=$work/server.log
  "$@" >"$log" 2>&1 &
  pid=$!
  url=""
  for _ in $(seq 200); do
    url=$(sed -n 's|^ready .*"api":"\(http://[0-9.]*:[0-9]*\)".*|\1|p' "$log" | head -n 1)
    [ -n "$url" ] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "bench-http: the server did not start:" >&2; cat "$log" >&2; exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

# The server's CPU time so far (user + system), in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# Bytes the server has written to disk so far.
written() { awk '/^write_bytes/ {print $2}' "/proc/$pid/io"; }

load() { # label round path
  local before after wbefore wafter
  before=$(cpu_ticks)
  wbefore=$(written)
  BENCH_TOKEN=$token BENCH_PATH=$3 BENCH_SALT="$1-$2" \
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" -s scripts/bench-http.lua "$url" \
    >"$work/wrk"
  after=$(cpu_ticks)
  wafter=$(written)
  # The server's CPU per request, in microseconds, over the load alone.
  awk -v l="$1" -v r="$2" -v t=$((after - before)) -v w=$((wafter - wbefore)) -v hz="$(getconf CLK_TCK)" \
    '/^RESULT/ {printf "%-9s %5s %9s %8s %8s %8s %8s %7s %9.1f %9.0f\n", l, r, $2, $3, $4, $5, $6, $7, ($8 > 0 ? t / hz * 1e6 / $8 : 0), ($8 > 0 ? w / $8 : 0)}' \
    "$work/wrk" | tee "$work/last"
}

broker_run() { # label round bin
  local dir=$work/$1-$2
  start "$3" serve --listen 127.0.0.1:0 --data-dir "$dir" --admin-token "$token"
  "$3" bench storm --broker "$url" --token "$token" --hosts "$HOSTS" --users 1 --quiet >/dev/null
  curl -sf -o /dev/null -X PUT "$url/api/v1/hostPools/bench-storm" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' \
    -d '{"hostPoolType":"Pooled","loadBalancerType":"BreadthFirst","maxSessionLimit":100000}'
  load "$1" "$2" /api/v1/hostPools/bench-storm/connect
  stop
  rm -rf "$dir"
}

echo "wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s; $HOSTS hosts; $(date -u +%FT%TZ); load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-9s %5s %9s %8s %8s %8s %8s %7s %9s %9s\n" run round "req/s" p50ms p99ms p999ms maxms errors cpu_us wr_bytes
for round in $(seq "$ROUNDS"); do
  start "$DEVBENCH" ceiling-server --listen 127.0.0.1:0
  load ceiling "$round" /api/v1/hostPools/bench-storm/connect
  stop
  c=$(awk '{print $3}' "$work/last")
  c_cpu=$(awk '{print $9}' "$work/last")
  broker_run broker "$round" "$BIN"
  b=$(awk '{print $3}' "$work/last")
  b_cpu=$(awk '{print $9}' "$work/last")
  line="round $round: broker/ceiling = $(awk -v b="$b" -v c="$c" 'BEGIN {printf "%.2f", b / c}')"
  line="$line, CPU per request broker/ceiling = $(awk -v b="$b_cpu" -v c="$c_cpu" 'BEGIN {printf (c > 0 ? "%.1f" : "n/a"), (c > 0 ? b / c : 0)}')"
  if [ -n "${BASELINE_BIN:-}" ]; then
    broker_run baseline "$round" "$BASELINE_BIN"
    o=$(awk '{print $3}' "$work/last")
    line="$line, baseline/ceiling = $(awk -v b="$o" -v c="$c" 'BEGIN {printf "%.2f", b / c}'), broker/baseline = $(awk -v b="$b" -v o="$o" 'BEGIN {printf "%.2f", b / o}')"
  fi
  echo "$line"
done
