#!/usr/bin/env bash
# Headless Chromium for tests/test_report_width.py (reports measured at 1280 px in a real
# browser): the Debian package, installed when missing. Without root or apt-get it says so
# and the test skips with that reason; CI runs as root and installs it.
set -euo pipefail
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  echo "installed $(chromium --version)"
else
  echo "install_browser.sh: no chromium and no root apt-get here; tests/test_report_width.py will skip" >&2
fi
