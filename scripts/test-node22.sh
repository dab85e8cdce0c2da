#!/usr/bin/env bash
# `npm run test:node22`: the unit and api projects (`npm run test:fast`) on Node 22, the oldest supported line
# (package.json's engines), installed from the npm registry when the machine's node is another
# (scripts/install-node.sh). The whole suite, the e2e project with it, runs on Node 24, the baseline.
# Arguments go to vitest.
set -euo pipefail
cd "$(dirname "$0")/.."

PATH="$(scripts/install-node.sh 22):$PATH"
export PATH

echo "Node $(node -v): the unit and api projects"
npx vitest run --project unit --project api "$@"
