#!/usr/bin/env bash
# Best effort: ccache makes a neighbouring llama.cpp release build about 40% cheaper (ggml's
# cmake uses it when it is on the PATH; docs/upgrades.md has the figures). Installs Debian's
# ccache package when it is missing and we are root; never fails the caller: without ccache
# every build is a full one, nothing else changes.
set -uo pipefail

command -v ccache >/dev/null && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "ccache is not installed (optional: apt-get install ccache makes release builds cheaper)" >&2
  exit 0
fi
echo "installing Debian's ccache package (cheaper llama.cpp release builds)" >&2
{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ccache; } >/dev/null 2>&1 \
  || echo "ccache did not install; builds will be full builds" >&2
exit 0
