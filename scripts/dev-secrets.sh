#!/usr/bin/env bash
# Prints, as export lines for eval, the development secrets of make run and
# make token, generated at the first call into var/secrets.env (git-ignored,
# mode 600) and reused afterwards: no secret of the local stack is one the
# repository publishes. A variable already set in the environment wins.
set -euo pipefail
cd "$(dirname "$0")/.."

file=var/secrets.env
rand() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

if ! [ -s "$file" ]; then
  mkdir -p var
  umask 077
  # A clone that ran make run before keeps its tracking secret, so the
  # links in its outbox still work.
  tracking=$(cat var/tracking-secret 2>/dev/null || rand)
  cat >"$file" <<ENV
TRACKING_SECRET=$tracking
DASHBOARD_JWT_SECRET=$(rand)
DASHBOARD_JWT_ISSUER=http://localhost:8080/dev
DASHBOARD_JWT_AUDIENCE=tidings-dev-dashboard
ENV
  echo "generated the development secrets in $file" >&2
fi

while IFS='=' read -r name value; do
  [ -n "$name" ] || continue
  if [ -z "${!name:-}" ]; then
    printf 'export %s=%q\n' "$name" "$value"
  fi
done <"$file"
