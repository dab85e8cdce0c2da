#!/usr/bin/env bash
# Prints the bin/ directory of a Node.js of the given major version: the machine's own when it is that
# version, else one installed from the npm registry. The package node-linux-<arch>@MAJOR ships node's
# official binary (bin/node); npm stays the machine's, run by whichever node comes first on PATH. Installed
# into .ci/node/MAJOR (ignored by git and by the image's build), once per checkout.
#
#   PATH="$(scripts/install-node.sh 24):$PATH"
set -euo pipefail
major=${1:?usage: scripts/install-node.sh MAJOR}
cd "$(dirname "$0")/.."

major_of() { "$1" -p 'process.versions.node.split(".")[0]'; }

if [ "$(major_of node)" = "$major" ]; then
  dirname "$(command -v node)"
  exit 0
fi
if [ "$(uname -s)" != Linux ]; then
  echo "scripts/install-node.sh: no Node $major here, and the npm registry's node packages used here are Linux builds; install Node $major" >&2
  exit 1
fi
package=node-linux-$(node -p process.arch)
dir=.ci/node/$major
bin=$PWD/$dir/node_modules/$package/bin
if ! { [ -x "$bin/node" ] && [ "$(major_of "$bin/node")" = "$major" ]; }; then
  echo "Node $major: installing $package@$major from the npm registry into $dir" >&2
  npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund --loglevel=error "$package@$major" >&2
fi
echo "$bin"
