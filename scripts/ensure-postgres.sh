#!/usr/bin/env bash
# Make sure a Postgres answers on 127.0.0.1:5432 for the test suite (trust auth for user
# postgres). Starts the machine's cluster if it is installed but down; installs Debian's
# postgresql package when it is missing and we are root. Never stops or reconfigures a
# running server.
set -euo pipefail
HOST=127.0.0.1
PORT=5432

ready() { pg_isready -q -h "$HOST" -p "$PORT" 2>/dev/null; }

if command -v pg_isready >/dev/null && ready; then
  exit 0
fi

if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "Postgres is not installed and this is not root: install postgresql or set WATCHKEEPER_TEST_PG" >&2
    exit 1
  fi
  echo "installing Debian's postgresql package for the test suite" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  version=$(ls /etc/postgresql | sort -V | tail -1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  # Test-only cluster on a fresh machine: trust loopback connections.
  sed -i -E 's/^(host\s+all\s+all\s+127\.0\.0\.1\/32\s+)\S+/\1trust/' "$hba"
fi

version=$(ls /etc/postgresql | sort -V | tail -1)
echo "starting Postgres $version cluster 'main'" >&2
pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
for _ in $(seq 1 30); do
  ready && exit 0
  sleep 1
done
echo "Postgres did not come up on $HOST:$PORT" >&2
exit 1
