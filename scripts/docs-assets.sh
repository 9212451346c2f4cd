#!/usr/bin/env bash
# Vendor Redoc's standalone bundle for the API reference page (GET /docs)
# into api/docsassets, and write api/docsassets/README.md with what was
# taken, its hashes and the changes made to it.
#
#   make docs-assets                      # the pinned version
#   make docs-assets REDOC_VERSION=2.5.5  # another one: review the diff,
#                                         # then go test ./api/ -run Docs
#
# npm pack checks the tarball against the registry's integrity hash. The
# bundle is changed in exactly two places, each found exactly once or the
# script stops (a new version must be read again, not patched blindly):
#   1. the Redocly logo in the side menu's "API docs by Redocly" line is
#      an <img> of https://cdn.redoc.ly/redoc/logo-mini.svg, loaded on
#      every page view; its src becomes "" (no request; the img fires
#      error, and Redoc's own onError hides it);
#   2. the sourceMappingURL comment goes (the 3.9 MB map is not vendored).
set -euo pipefail
cd "$(dirname "$0")/.."
version="${REDOC_VERSION:-2.5.4}"
dest=api/docsassets
command -v npm >/dev/null || { echo "npm is required (apt-get install nodejs npm)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent --json "redoc@$version" >pack.json)
tarball="$tmp/redoc-$version.tgz"
integrity=$(node -e 'console.log(require(process.argv[1])[0].integrity)' "$tmp/pack.json")
tar -xzf "$tarball" -C "$tmp"
src="$tmp/package/bundles/redoc.standalone.js"
upstream_sha=$(sha256sum "$src" | cut -d' ' -f1)

mkdir -p "$dest"
node - "$src" "$dest/redoc.standalone.js" <<'JS'
const fs = require('fs');
const [from, to] = process.argv.slice(2);
let s = fs.readFileSync(from, 'utf8');
function once(what, re, by) {
  const n = (s.match(new RegExp(re.source, 'g')) || []).length;
  if (n !== 1) {
    console.error(`docs-assets: ${what}: found ${n} times, want 1; read the new bundle and update scripts/docs-assets.sh`);
    process.exit(1);
  }
  s = s.replace(re, by);
}
once('the Redocly logo', /src:"https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini\.svg"/, 'src:""');
once('the source map comment', /\n\/\/# sourceMappingURL=redoc\.standalone\.js\.map\s*$/, '\n');
// What the page must never load: hosts a renderer typically fetches from.
for (const host of ['cdn.redoc.ly', 'fonts.googleapis.com', 'fonts.gstatic.com', 'unpkg.com', 'jsdelivr.net', 'cdnjs.']) {
  if (s.includes(host)) {
    console.error(`docs-assets: the bundle still names ${host}; read it and update scripts/docs-assets.sh`);
    process.exit(1);
  }
}
fs.writeFileSync(to, s);
JS
cp "$tmp/package/LICENSE" "$dest/LICENSE"
cp "$tmp/package/bundles/redoc.standalone.js.LICENSE.txt" "$dest/redoc.standalone.js.LICENSE.txt"
vendored_sha=$(sha256sum "$dest/redoc.standalone.js" | cut -d' ' -f1)

cat >"$dest/README.md" <<EOF
# Vendored renderer of the API reference page

\`GET /docs\` (\`api/docs.go\`) renders \`GET /api/openapi.json\` with the
standalone bundle of [Redoc](https://github.com/Redocly/redoc), embedded in
the binary and served from \`/docs/assets/\`, so that the page loads nothing
from anywhere else (docs/decisions.md, "API reference page").

| | |
|---|---|
| package | \`redoc@$version\` (npm), MIT (\`LICENSE\`; bundled third-party notices in \`redoc.standalone.js.LICENSE.txt\`) |
| tarball integrity | \`$integrity\` |
| upstream \`bundles/redoc.standalone.js\` sha256 | \`$upstream_sha\` |
| vendored \`redoc.standalone.js\` sha256 | \`$vendored_sha\` |
| refresh | \`make docs-assets\` (\`REDOC_VERSION=<version>\` for another), which runs \`scripts/docs-assets.sh\` |

Changes to the upstream bundle (\`scripts/docs-assets.sh\` makes them, and
stops if either is not found exactly once):

1. The side menu's "API docs by Redocly" line shows an \`<img>\` of
   \`https://cdn.redoc.ly/redoc/logo-mini.svg\` on every page view; its
   \`src\` is emptied, so no request is made and Redoc's own \`onError\`
   hides the image. The link text stays.
2. The \`sourceMappingURL\` comment is removed (the map is not vendored).

\`api/docs_test.go\` checks that the embedded bundle's sha256 is the one
above.
EOF
echo "vendored redoc@$version: $dest/redoc.standalone.js sha256 $vendored_sha (upstream $upstream_sha)"
