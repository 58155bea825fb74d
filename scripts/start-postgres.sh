#!/usr/bin/env bash
# Starts this machine's PostgreSQL cluster if it is not answering on
# 127.0.0.1:5432 (the store's and the binary's PostgreSQL tests need it).
# The machine normally starts it itself; CI calls this in case it is down.
set -euo pipefail

if pg_isready -q -h 127.0.0.1 -p 5432; then
  exit 0
fi
version=$(ls /etc/postgresql | sort -V | tail -n 1)
echo "PostgreSQL is down: starting cluster ${version}/main"
pg_ctlcluster --skip-systemctl-redirect "${version}" main start
# Wait for it to accept connections (30 s at most).
for _ in $(seq 1 60); do
  if pg_isready -q -h 127.0.0.1 -p 5432; then
    exit 0
  fi
  sleep 0.5
done
echo "PostgreSQL did not start on 127.0.0.1:5432" >&2
exit 1
