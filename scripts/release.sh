#!/bin/sh
# Builds Nexus and assembles in OUT what production runs: the compiled code (dist/), the bundled contract
# (generated/openapi.json, read at start), package.json and the production dependencies. Run from the
# repository root after `npm ci`:
#
#   scripts/release.sh OUT
#
# The image's build stage runs it (Dockerfile) and copies OUT into the final stage. The test of the image's
# start sequence (test/spine/release.test.ts) runs it too, then starts OUT as the image does.
set -eu
out=${1:?usage: scripts/release.sh OUT}

npm run build
rm -rf "$out"
mkdir -p "$out/generated"
cp -R dist "$out/dist"
cp generated/openapi.json "$out/generated/"
cp package.json package-lock.json LICENSE "$out/"
# The installed dependencies (hard-linked where the file system allows), pruned to production's: what
# `npm ci --omit=dev` would install, without going to the registry again. npm rewrites its hidden lockfile:
# removed first, so the new one is a new file and not the linked original.
cp -al node_modules "$out/node_modules" 2>/dev/null || { rm -rf "$out/node_modules"; cp -R node_modules "$out/node_modules"; }
rm -f "$out/node_modules/.package-lock.json"
(cd "$out" && npm prune --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error)
# gpt-tokenizer's TypeScript sources and the vocabularies of encodings Nexus does not count with (it reads
# o200k_base.tiktoken only: src/protocols/o200k-vocabulary.ts) are not run.
rm -rf "$out/node_modules/gpt-tokenizer/src"
for unused in cl100k_base.tiktoken p50k_base.tiktoken r50k_base.tiktoken TestPlans.txt; do
  rm -f "$out/node_modules/gpt-tokenizer/data/$unused"
done
# Type declarations and source maps are read by editors and debuggers, never by node: about a third of the
# dependencies' bytes (the AWS SDK ships each package three ways, with types and maps).
find "$out/node_modules" -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.js.map' \
  -o -name '*.mjs.map' -o -name '*.cjs.map' -o -name '*.d.ts.map' \) -delete
find "$out/node_modules" -type d -empty -delete
