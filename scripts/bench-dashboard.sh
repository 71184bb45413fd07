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

target="${CARGO_TARGET_DIR:-target}"
# shellcheck source=scripts/browser-setup.sh
. scripts/browser-setup.sh
browser_setup
if [ -z "${BIN:-}" ]; then
  cargo build --quiet --release -p the-loop
  BIN="$target/release/the-loop"
fi
records="${RECORDS:-10000}"

work="$(mktemp -d)"
stop() {
  if [ -n "${service_pid:-}" ]; then
    kill "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap stop EXIT

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

hook_port="$(free_port)"
api_port="$(free_port)"
cat > "$work/cli-config.yaml" <<YAML
state:
  root: $work/state
webhooks:
  ghWebhook:
    enabled: true
    port: $hook_port
service:
  port: $api_port
YAML
THE_LOOP_GH_WEBHOOK_SECRET=bench "$BIN" --config "$work/cli-config.yaml" start --foreground \
  >"$work/service.out" 2>&1 &
service_pid=$!
for _ in $(seq 1 150); do
  curl -fs "http://127.0.0.1:$api_port/api/v1/health" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fs "http://127.0.0.1:$api_port/api/v1/health" >/dev/null || {
  echo "bench-dashboard: the service did not start; it said:" >&2
  cat "$work/service.out" >&2
  exit 1
}

echo "bench-dashboard: $records portable records, load average $(cut -d' ' -f1-3 /proc/loadavg)"
DASHBOARD_URL="http://127.0.0.1:$api_port/" LOADS="${LOADS:-5}" RECORDS="$records" \
  node scripts/bench_dashboard.mjs
