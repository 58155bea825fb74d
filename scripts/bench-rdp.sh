#!/usr/bin/env bash
# Reproduces "RDP front door vs HAProxy 2.6" in docs/benchmarks.md: builds
# the release binaries (`deskbroker` and the development benchmarks,
# `deskbroker-devbench`), installs HAProxy (Debian package haproxy, 2.6 on
# Debian 12) if it is missing, and runs `deskbroker-devbench rdp` with the
# parameters used for the figures. Everything runs on loopback; HAProxy and
# the private broker are started by the benchmark and stopped at its end.
#
# Extra arguments go to `deskbroker-devbench rdp`, after the documented ones,
# e.g. `scripts/bench-rdp.sh -o json` (or `-o tsv`) or `scripts/bench-rdp.sh --rounds 3`.
set -euo pipefail

cd "$(dirname "$0")/.."

find_haproxy() {
  command -v haproxy 2>/dev/null && return 0
  for dir in /usr/sbin /sbin /usr/local/sbin; do
    [ -x "$dir/haproxy" ] && { echo "$dir/haproxy"; return 0; }
  done
  return 1
}

if ! haproxy=$(find_haproxy); then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "bench-rdp: need root or sudo to install haproxy" >&2; exit 1; }
    sudo=(sudo)
  fi
  command -v apt-get >/dev/null 2>&1 || { echo "bench-rdp: no apt-get; install HAProxy 2.6 by hand" >&2; exit 1; }
  # The package's service is not wanted: the benchmark runs its own haproxy.
  "${sudo[@]}" apt-get install -y haproxy || { "${sudo[@]}" apt-get update && "${sudo[@]}" apt-get install -y haproxy; }
  haproxy=$(find_haproxy) || { echo "bench-rdp: haproxy is still not installed" >&2; exit 1; }
fi
echo "bench-rdp: $("$haproxy" -v | head -n 1)" >&2

cargo build --release -p deskbroker -p devbench

# 8 loopback session hosts; 64 clients for 5 s per connection-rate run;
# 1,000 returning users; 2,000 one-at-a-time connections for the latency;
# 4 GiB over 4 connections for the throughput (1 GiB runs last under half a
# second here: too short to be steady); 5 interleaved rounds, median.
exec ./target/release/deskbroker-devbench rdp \
  --deskbroker ./target/release/deskbroker \
  --haproxy "$haproxy" \
  --backends 8 \
  --concurrency 64 \
  --rate-seconds 5 \
  --reconnect-users 1000 \
  --latency-connections 2000 \
  --stream-mib 4096 \
  --streams 4 \
  --rounds 5 \
  "$@"
