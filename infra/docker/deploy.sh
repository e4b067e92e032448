#!/bin/sh
# Usage: sh infra/docker/deploy.sh <package folder> <out dir>   (from the repository root)
#
# What the image runs: `pnpm deploy --prod` of one workspace package (its dist/, its
# production dependencies, workspace packages as real folders), trimmed to what the process
# reads at run time: package.json, dist/, node_modules/, and the files beside them that are
# not TypeScript (the authority's src/lua/*.lua, read from ../src/lua relative to dist; the
# aggregator's migrations/*.sql). Used by infra/docker/Dockerfile and by its layout test.
set -eu
package="$1"
out="$2"
log="$(mktemp)"
# pnpm 12 sometimes fails to resolve its own pin (@pnpm/exe builds) when a registry does not
# publish them; that step is not about our dependencies, so it is retried, anything else is not.
attempt=1
until pnpm --filter "./${package}" deploy --prod "$out" >"$log" 2>&1; do
  if [ "$attempt" -ge 3 ] || ! grep -q 'resolve package manager dependencies' "$log"; then
    cat "$log" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  rm -rf "$out"
done
rm -f "$log"
cd "$out"
rm -rf test bench scripts .tsbuild tsconfig.json tsconfig.src.json tsconfig.test.json \
  pnpm-lock.yaml pnpm-workspace.yaml README.md
if [ -d src ]; then
  find src -name '*.ts' -type f -delete
  find src -type d -empty -delete
fi
