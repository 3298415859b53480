#!/usr/bin/env bash
# Browser tests drive Debian's chromium through Playwright (playwright install
# cannot download browsers here). Install the package when it is missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's chromium for the browser tests..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  command -v chromium >/dev/null && exit 0
fi
echo "ERROR: chromium is not installed. Install Debian's 'chromium' package (sudo apt-get install chromium)." >&2
exit 1
