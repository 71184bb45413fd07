#!/usr/bin/env bash
# Installs the pinned Claude Code CLI (npm `@anthropic-ai/claude-code`) under the cargo
# target directory and prints the path of its `claude` binary. Idempotent: a second run
# with the pinned version in place prints the path and does nothing else. The tests that
# run the real agent call this (docs/real-claude.md); `.ci/run` calls it before them.
#
#   bash scripts/install-claude.sh            # -> target/claude-code/node_modules/.bin/claude
#
# Exit 0 with the path on stdout; exit 3 when npm is missing or the registry cannot be
# reached (the tests then skip with a notice); anything else is a real failure.
set -euo pipefail

VERSION=2.1.197
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
prefix="$target/claude-code"
bin="$prefix/node_modules/.bin/claude"

mkdir -p "$prefix"
exec 9>"$prefix/.install.lock"
flock 9

if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null | cut -d' ' -f1)" = "$VERSION" ]; then
  echo "$bin"
  exit 0
fi

command -v npm >/dev/null 2>&1 || { echo "install-claude: npm is not installed" >&2; exit 3; }
echo "install-claude: installing @anthropic-ai/claude-code@$VERSION under $prefix" >&2
if ! npm install --prefix "$prefix" --no-audit --no-fund --silent \
  "@anthropic-ai/claude-code@$VERSION" >&2; then
  echo "install-claude: npm could not install @anthropic-ai/claude-code@$VERSION" >&2
  exit 3
fi
"$bin" --version >/dev/null
echo "$bin"
