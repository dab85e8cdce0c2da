#!/usr/bin/env bash
# `npm run test:node22`: the API and unit tests on Node 22, the oldest supported line (package.json's engines),
# installed from the npm registry when the machine's node is another (scripts/install-node.sh). The whole suite
# runs on Node 24, the baseline; here run the test files that start neither a process nor a browser:
#   - every test/**/*.api.test.ts (through HTTP, in process, on the test PostgreSQL);
#   - every other test file that uses none of the helpers that start a Nexus, a database schema, a child
#     process or a browser (the unit tests of pure rules and small modules).
# Arguments go to vitest.
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s globstar

PATH="$(scripts/install-node.sh 22):$PATH"
export PATH

heavy="support/(test-app|test-db|nexus-process|sdk|quota-use)|gateway-support|child_process|playwright|src/db/database|from 'pg'"
mapfile -t files < <({ ls test/**/*.api.test.ts; grep -L -E "$heavy" test/**/*.test.ts; } | sort -u)
echo "Node $(node -v): ${#files[@]} test files (the API tests and the unit tests)"
npx vitest run "$@" "${files[@]}"
