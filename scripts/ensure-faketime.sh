#!/usr/bin/env bash
# Make sure `faketime` (Debian's libfaketime wrapper) is on the PATH for `make test-clock`.
# Installs Debian's faketime package when it is missing and we are root; otherwise says what
# to install. Never touches anything else.
set -euo pipefail

if command -v faketime >/dev/null; then
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "faketime is not installed and this is not root: install Debian's faketime package" >&2
  exit 1
fi
echo "installing Debian's faketime package for make test-clock" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null
command -v faketime >/dev/null || { echo "faketime did not install" >&2; exit 1; }
