#!/usr/bin/env bash
# The storm benchmark on SQLite, on PostgreSQL with one broker, and on
# PostgreSQL with three replicas (clients spread over all three), in
# interleaved rounds on this machine; prints one JSON line per run.
#
#   scripts/bench-replicas.sh [ROUNDS] [HOSTS] [USERS] [CONCURRENCY]
#
# Needs PostgreSQL at $DESKBROKER_BENCH_SERVER (default this machine's);
# each PostgreSQL run gets a fresh database deskbroker_bench_storm.
set -euo pipefail
rounds=${1:-3}
hosts=${2:-10000}
users=${3:-100000}
concurrency=${4:-64}
server=${DESKBROKER_BENCH_SERVER:-postgres://postgres@127.0.0.1:5432}
bin=${DESKBROKER_BIN:-target/release/deskbroker}
db=deskbroker_bench_storm

fresh_db() {
  psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
    -c "CREATE DATABASE $db" >/dev/null
}

run() {
  local label=$1
  shift
  "$bin" bench storm --quiet --output json --hosts "$hosts" --users "$users" \
    --concurrency "$concurrency" "$@" |
    python3 -c "import json,sys; r=json.load(sys.stdin); print(json.dumps({'run': '$label', 'connectsPerSecond': r['connectsPerSecond'], 'p50': r['latencyMs']['p50'], 'p99': r['latencyMs']['p99'], 'p999': r['latencyMs']['p999'], 'placed': r['placed'], 'errors': r['errors'], 'brokers': r['brokers']}))"
}

for round in $(seq 1 "$rounds"); do
  run "sqlite round $round"
  fresh_db
  run "postgres 1 replica round $round" --database-url "$server/$db"
  fresh_db
  run "postgres 3 replicas round $round" --database-url "$server/$db" --replicas 3
done
psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
