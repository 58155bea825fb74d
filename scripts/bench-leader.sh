#!/usr/bin/env bash
# The leader lease, measured on this machine with three replicas of the
# release binary on a fresh PostgreSQL database:
#
# 1. a busy leader is not deposed: a logon storm at full speed on a pool of
#    HOSTS hosts, USERS connects, with the default lease; prints the
#    leadership epoch before and after (equal: no change of leader) and the
#    replicas' step-down counters;
# 2. a frozen leader is replaced: TRIALS times, SIGSTOP of the leader, then
#    connects through another replica until one is placed; prints the time
#    from SIGSTOP to that placement, then SIGCONT;
# 3. a killed leader is replaced: TRIALS times, kill -9 of the leader, then
#    the same; prints the time from the kill to that placement, then starts
#    the replica again. The new leader sees nothing listens at the old
#    one's address and need not wait out its lease.
#
#   scripts/bench-leader.sh [HOSTS] [USERS] [CONCURRENCY] [TRIALS]
#
# Needs PostgreSQL at $DESKBROKER_BENCH_SERVER (default this machine's). Stops
# only the replicas it started, by their own pids.
set -euo pipefail
hosts=${1:-10000}
users=${2:-250000}
concurrency=${3:-64}
trials=${4:-5}
server=${DESKBROKER_BENCH_SERVER:-postgres://postgres@127.0.0.1:5432}
bin=${DESKBROKER_BIN:-target/release/deskbroker}
db=deskbroker_bench_leader
export DESKBROKER_ADMIN_TOKEN=${DESKBROKER_ADMIN_TOKEN:-$(openssl rand -hex 32)}
export DESKBROKER_AUDITED_RATE_LIMIT=0
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$work"
  psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || true
}
trap cleanup EXIT

psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
urls=()
start_replica() {
  local i=$1 port=$((18400 + $1))
  "$bin" serve --database-url "$server/$db" --listen "127.0.0.1:$port" \
    --data-dir "$work/r$i" >>"$work/r$i.log" 2>&1 &
  pids[$i]=$!
  urls[$i]="http://127.0.0.1:$port"
}
for i in 0 1 2; do
  start_replica "$i"
done
health() { curl -s --max-time 2 "$1/healthz" || true; }
role_of() { health "$1" | python3 -c "import json,sys; print(json.load(sys.stdin).get('role',''))" 2>/dev/null || true; }
epoch() { psql -Atq "$server/$db" -c "SELECT epoch FROM deskbroker_leader"; }
leader() {
  for i in 0 1 2; do
    if [ "$(role_of "${urls[$i]}")" = leader ]; then echo "$i"; return; fi
  done
  echo -1
}
for _ in $(seq 1 300); do
  [ "$(leader)" -ge 0 ] && break
  sleep 0.1
done

before=$(epoch)
"$bin" bench storm --quiet --output json --broker "$(IFS=,; echo "${urls[*]}")" \
  --token "$DESKBROKER_ADMIN_TOKEN" --hosts "$hosts" --users "$users" --concurrency "$concurrency" \
  >"$work/storm.json"
after=$(epoch)
python3 - "$work/storm.json" "$before" "$after" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({"storm": {"connectsPerSecond": r["connectsPerSecond"], "placed": r["placed"],
      "errors": r["errors"], "seconds": r.get("seconds", r.get("elapsedSeconds")),
      "p99": r["latencyMs"]["p99"]}, "epochBefore": int(sys.argv[2]), "epochAfter": int(sys.argv[3])}))
EOF
for i in 0 1 2; do
  printf 'replica %s step-downs: ' "$i"
  curl -s -H "Authorization: Bearer $DESKBROKER_ADMIN_TOKEN" "${urls[$i]}/metrics" |
    awk '/^deskbroker_replica_step_downs_total/ {print $2; found=1} END {if (!found) print 0}'
done

# Connects through replica $1 until one is placed; prints the seconds from
# $2 (a date +%s.%N) and the attempts, as JSON fields.
placed_after() {
  local other=$1 start=$2 tag=$3 n=0 code
  while :; do
    n=$((n + 1))
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X POST \
      -H "Authorization: Bearer $DESKBROKER_ADMIN_TOKEN" -H 'Content-Type: application/json' \
      -d "{\"user\": \"$tag-$n\"}" "${urls[$other]}/api/v1/hostPools/bench-storm/connect")
    [ "$code" = 200 ] && break
  done
  echo "\"seconds\": $(echo "$(date +%s.%N) - $start" | bc), \"attempts\": $n"
}

for t in $(seq 1 "$trials"); do
  l=$(leader)
  other=$(((l + 1) % 3))
  kill -STOP "${pids[$l]}"
  start=$(date +%s.%N)
  echo "{\"freezeTrial\": $t, $(placed_after "$other" "$start" "frozen-$t")}"
  kill -CONT "${pids[$l]}"
  # The woken replica steps down and follows before the next trial.
  for _ in $(seq 1 300); do
    [ "$(role_of "${urls[$l]}")" = follower ] && break
    sleep 0.1
  done
done

for t in $(seq 1 "$trials"); do
  l=$(leader)
  other=$(((l + 1) % 3))
  kill -KILL "${pids[$l]}"
  start=$(date +%s.%N)
  echo "{\"killTrial\": $t, $(placed_after "$other" "$start" "killed-$t")}"
  wait "${pids[$l]}" 2>/dev/null || true
  start_replica "$l"
  for _ in $(seq 1 600); do
    [ "$(role_of "${urls[$l]}")" = follower ] && break
    sleep 0.1
  done
done
