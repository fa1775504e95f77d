#!/usr/bin/env bash
# Compiles the service to dist/ (what `npm start`, `npm run worker` and the image run): tsc over
# tsconfig.build.json, the bundled contract beside it, and the owner console (Vite) where
# dist/src/console/console.js looks for it. `--if-stale` skips the build when dist/ is newer than every
# source it is made from, so a second `npm start` starts at once. Run from anywhere.
# The new tree is built apart and swapped in at the end, so a half-built dist/ is never run.
set -euo pipefail

cd "$(dirname "$0")/.."
STAMP=dist/.built
SOURCES=(src scripts generated contracts/artifacts console tsconfig.json tsconfig.build.json)

if [[ "${1:-}" == "--if-stale" && -f "$STAMP" ]]; then
  newer=$(find "${SOURCES[@]}" -path console/dist -prune -o -newer "$STAMP" -type f -print -quit)
  [[ -z "$newer" ]] && exit 0
fi

out=$(mktemp -d dist.build-XXXXXX)
trap 'rm -rf "$out"' EXIT
# Sources edited while this runs are newer than the stamp, so the next --if-stale builds again.
chmod 755 "$out"
touch "$out/.built"
npx --no-install tsc -p tsconfig.build.json --outDir "$out"
mkdir -p "$out/generated" "$out/console"
cp generated/openapi.json "$out/generated/openapi.json"
npx --no-install vite build --config console/vite.config.ts
cp -r console/dist "$out/console/dist"
rm -rf dist
mv "$out" dist
trap - EXIT
