#!/usr/bin/env bash
# The dashboard's first paint over a large state root: RECORDS (default 10000) portable
# records written straight into a fresh state root (a mix of ended, armed and watched
# items, each with a title), the real service over it (`start --foreground`, release
# build, control plane on a free port), then headless Chromium (scripts/bench_dashboard.mjs)
# loads the board LOADS times (default 5) in a fresh tab each time and reads the time
# from navigation to the board's `board-painted` mark (every answer fetched, joined and
# drawn), and to the first contentful paint; node itself times `GET /api/v1/work-items`.
# Prints the medians; the figures go in docs/performance.md by hand.
#
# Environment: RECORDS, LOADS, BIN (a prebuilt binary; default: build target/release/the-loop).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/service.sh

target="${CARGO_TARGET_DIR:-target}"
# shellcheck source=scripts/browser-setup.sh
. scripts/browser-setup.sh
browser_setup
if [ -z "${BIN:-}" ]; then
  cargo build --quiet --release -p the-loop
  BIN="$target/release/the-loop"
fi
records="${RECORDS:-10000}"

bin="$BIN"
work="$(mktemp -d)"
trap 'stop_service; rm -rf "$work"' EXIT

RECORDS="$records" STATE="$work/state" node -e '
const fs = require("fs");
const dir = `${process.env.STATE}/portable`;
fs.mkdirSync(dir, { recursive: true });
const at = new Date(Date.now() - 3600e3).toISOString();
for (let n = 1; n <= Number(process.env.RECORDS); n++) {
  const record = {
    ref: `github:octo/app#${n}`,
    url: `https://github.com/octo/app/issues/${n}`,
    poll: { seenComments: [`IC_${n}a`, `IC_${n}b`], lastPolledAt: at, title: `Work item number ${n}: make the parser handle case ${n}` },
  };
  if (n % 10 === 0) record.control = { command: "start", source: "comment", actor: "alice", requestedAt: at };
  else if (n % 10 < 8) record.ended = { state: "closed", kind: "issue", reason: "issue-closed", at, source: "poll" };
  fs.writeFileSync(`${dir}/github-octo-app-${n}.json`, JSON.stringify(record));
}'

write_service_config "$work"
start_service "$work" "$api_port"

echo "bench-dashboard: $records portable records, load average $(cut -d' ' -f1-3 /proc/loadavg)"
DASHBOARD_URL="http://127.0.0.1:$api_port/" LOADS="${LOADS:-5}" RECORDS="$records" \
  node scripts/bench_dashboard.mjs
