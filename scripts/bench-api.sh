#!/usr/bin/env bash
# Control-plane load (issue #15 item 7), against a running `the-loop start --foreground`
# (release build) over a generated state root:
#
# 1. `GET /api/v1/work-items` over RECORDS (10 000) portable records: one cold request
#    (curl: time and size), then wrk for DURATION (THREADS threads, CONNECTIONS
#    connections): requests/s and latency p50/p99.
# 2. The stream's fan-out: CLIENTS (8) subscribers of `GET /api/v1/stream` while another
#    process appends RATE (1 000) lines a second for STREAM_SECONDS (10) to the event log
#    (scripts/bench_stream.py): frames lost, reordered or duplicated (any is a failure)
#    and the write-to-frame latency.
#
# Prints the load average before and after (other builds share the cores) and the
# service's RSS at the end. Environment: the upper-case names above, BIN (a prebuilt
# binary; default: build target/release/the-loop).
# Needs: wrk (apt-get install wrk), python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/service.sh

RECORDS="${RECORDS:-10000}"
DURATION="${DURATION:-10s}"
THREADS="${THREADS:-2}"
CONNECTIONS="${CONNECTIONS:-8}"
CLIENTS="${CLIENTS:-8}"
RATE="${RATE:-1000}"
STREAM_SECONDS="${STREAM_SECONDS:-10}"
command -v wrk >/dev/null || { echo "error: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
if [[ -z "${BIN:-}" ]]; then
  cargo build --release --quiet -p the-loop
  bin="${CARGO_TARGET_DIR:-target}/release/the-loop"
else
  bin="$BIN"
fi

work="$(mktemp -d "${CARGO_TARGET_DIR:-target}/bench-api.XXXXXX")"
trap 'stop_service; rm -rf "$work"' EXIT
write_service_config "$work" "  stream:
    maxSubscribers: $CLIENTS"

# RECORDS portable records the size of a polled, armed item's.
python3 - "$work/state/portable" "$RECORDS" <<'PY'
import json, os, sys
root, count = sys.argv[1], int(sys.argv[2])
os.makedirs(root, exist_ok=True)
for n in range(1, count + 1):
    repo = f"app{n % 50}"
    ref = f"github:octo/{repo}#{n}"
    record = {
        "ref": ref,
        "url": f"https://github.com/octo/{repo}/issues/{n}",
        "control": {"command": "start", "source": "comment", "actor": "octocat",
                    "requestedAt": "2026-11-29T10:00:00Z",
                    "note": f"https://github.com/octo/{repo}/issues/{n}#issuecomment-{n}"},
        "poll": {"seenComments": [f"IC_kwDO{n:08d}{k}" for k in range(3)],
                 "commentAttempts": {}, "spawn": {"attempts": 1, "gaveUp": False}},
    }
    with open(os.path.join(root, f"github-octo-{repo}-{n}.json"), "w") as f:
        json.dump(record, f)
PY

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
start_service "$work" "$api_port"
url="http://127.0.0.1:$api_port/api/v1/work-items"
curl -s -o /dev/null -w "work-items: cold request %{time_total}s, %{size_download} bytes\n" "$url"
count="$(curl -s "$url" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')"
[ "$count" = "$RECORDS" ] || { echo "error: $count records listed, not $RECORDS" >&2; exit 1; }
wrk -t "$THREADS" -c "$CONNECTIONS" -d "$DURATION" --timeout 30s --latency "$url" \
  | grep -E 'Requests/sec|^ +(50|99)%|Non-2xx|Socket errors' | sed 's/^ */work-items: /'

status=0
python3 scripts/bench_stream.py "$api_port" "$work/state/logs/events.jsonl" "$CLIENTS" "$RATE" "$STREAM_SECONDS" \
  || status=$?
echo "service RSS: $(( $(awk '/VmRSS/ {print $2}' "/proc/$service_pid/status") / 1024 )) MiB"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
