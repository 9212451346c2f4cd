#!/usr/bin/env bash
# Make sure a headless Chromium is installed for the browser tests
# (testenv.Browser): the preference page is tested in a real browser with
# JavaScript off. CHROME_PATH, when set, names the binary instead.
set -euo pipefail
if [ -n "${CHROME_PATH:-}" ] || command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
   || command -v google-chrome >/dev/null; then
  exit 0
fi
echo "installing chromium with apt-get (first time only)" >&2
export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" -ne 0 ]; then
  sudo apt-get update -qq && sudo apt-get install -y -qq chromium >/dev/null
else
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
