#!/bin/bash
# One round of `bench storm` against a fresh broker, with the broker's own
# CPU time for the storm (utime + stime of its serve process, from /proc):
# a figure that contention from other processes does not inflate, so two
# binaries or two sets of flags can be compared on a shared machine.
#
#   scripts/bench-storm-cpu.sh BROKER_BINARY LABEL [serve flags…]
#
# Prints: LABEL connects/s p99-ms cpu_s=N [evaluations=N evaluation_s=S]. The client is BENCH_CLIENT
# (default target/release/deskbroker); USERS, HOSTS, CONCURRENCY override
# the storm's size (20000, 200, 16); BENCH_ARGS adds flags to `bench storm`
# (e.g. `--scaling-plan scripts/bench-plan-all-on.json`).
set -euo pipefail
BIN=$1; shift; LABEL=$1; shift
CLIENT=${BENCH_CLIENT:-target/release/deskbroker}
D=$(mktemp -d)
T=$(openssl rand -hex 32)
DESKBROKER_ADMIN_TOKEN=$T "$BIN" serve --listen 127.0.0.1:0 --data-dir "$D" "$@" >"$D/out" 2>"$D/err" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 1 300); do grep -qs "^ready " "$D/out" && break; sleep 0.1; done
URL=$(sed -n 's/^ready .*"api":"\([^"]*\)".*/\1/p' "$D/out" | head -1)
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
TICKS=$(getconf CLK_TCK)
C0=$(cpu)
OUT=$("$CLIENT" bench storm --broker "$URL" --token "$T" --hosts "${HOSTS:-200}" \
    --users "${USERS:-20000}" --concurrency "${CONCURRENCY:-16}" ${BENCH_ARGS:-} --quiet 2>&1 | tail -1)
C1=$(cpu)
# Scaling-plan evaluations during the run, when a plan was put (their
# count, and the seconds they held the pool in all).
EVALS=$(curl -s -H "Authorization: Bearer $T" "$URL/metrics" |
  awk '/^deskbroker_autoscale_evaluations_total /{n=$2} /^deskbroker_autoscale_evaluation_seconds_sum /{s=$2}
       END {if (n) printf " evaluations=%d evaluation_s=%.4f", n, s}')
echo "$LABEL $(echo "$OUT" | awk '{print $1, $5}') cpu_s=$(awk -v a="$C0" -v b="$C1" -v t="$TICKS" 'BEGIN {printf "%.2f", (b - a) / t}')$EVALS"
