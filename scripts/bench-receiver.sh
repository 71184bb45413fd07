#!/usr/bin/env bash
# Webhook receiver load: signed `issue_comment` deliveries with distinct delivery ids,
# driven by wrk at a running `the-loop start --foreground` (release build).
# Budget (SPEC §7): >= 20 x 756 req/s with p99 <= 2 ms (wrk, 2 threads, 16 connections,
# loopback); RSS <= 15 MB idle and <= 25 MB after 100k requests; first /health <= 20 ms.
#
# Every 202 is answered only after the inbox journal's fdatasync that covers it, so the
# numbers depend on the disk under the state root. STATE_DIR picks it (default: a temp
# dir under target/, i.e. the project's disk); STATE_DIR=/dev/shm/... shows the
# receiver's own cost without the disk.
#
# Environment: DURATION (wrk -d, default 10s), THREADS (2), CONNECTIONS (16),
# STATE_DIR, BIN (a prebuilt binary; default: build target/release/the-loop).
# Needs: wrk (apt-get install wrk), python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-10s}"
THREADS="${THREADS:-2}"
CONNECTIONS="${CONNECTIONS:-16}"
if [[ -z "${BIN:-}" ]]; then
  cargo build --release --quiet -p the-loop
  BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/the-loop"
fi
command -v wrk >/dev/null || { echo "error: wrk is not installed (apt-get install wrk)" >&2; exit 2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-receiver.XXXXXX")"
STATE="${STATE_DIR:-$PWD/target/bench-receiver-state}/$(basename "$WORK")"
mkdir -p "$STATE"
SERVICE_PID=""
cleanup() {
  [[ -n "$SERVICE_PID" ]] && kill -TERM "$SERVICE_PID" 2>/dev/null && wait "$SERVICE_PID" 2>/dev/null
  rm -rf "$WORK" "$STATE"
}
trap cleanup EXIT

SECRET="bench-secret"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
cat > "$WORK/cli-config.yaml" <<EOF
state:
  root: $STATE
routing:
  authorizedUsers: [octocat]
webhooks:
  ghWebhook:
    enabled: true
    port: $PORT
EOF

# One realistic issue_comment body and its signature; wrk varies only X-GitHub-Delivery.
python3 - "$SECRET" "$WORK" <<'PY'
import hashlib, hmac, json, sys
secret, work = sys.argv[1], sys.argv[2]
body = json.dumps({
    "action": "created",
    "repository": {"full_name": "octo/app", "html_url": "https://github.com/octo/app"},
    "issue": {"number": 7, "title": "Parser drops the last token", "state": "open",
              "labels": [{"name": "the-loop: auto-execute"}],
              "html_url": "https://github.com/octo/app/issues/7", "user": {"login": "octocat"}},
    "comment": {"id": 1001, "node_id": "IC_kwDOA1001", "body": "Please also cover the empty input case. " * 8,
                "user": {"login": "octocat"},
                "html_url": "https://github.com/octo/app/issues/7#issuecomment-1001"},
    "sender": {"login": "octocat"},
}, separators=(",", ":"))
sig = "sha256=" + hmac.new(secret.encode(), body.encode(), hashlib.sha256).hexdigest()
lua = f"""
wrk.method = "POST"
wrk.body = {json.dumps(body)}
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-GitHub-Event"] = "issue_comment"
wrk.headers["X-Hub-Signature-256"] = "{sig}"
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("prefix", "bench-" .. os.time() .. "-" .. threads)
end
prefix = "bench"
local counter = 0
function request()
  counter = counter + 1
  wrk.headers["X-GitHub-Delivery"] = prefix .. "-" .. counter
  return wrk.format()
end
"""
open(f"{work}/deliveries.lua", "w").write(lua)
print(f"body: {len(body)} bytes")
PY

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
now_ns() { date +%s%N; }

export THE_LOOP_CLI_CONFIG="$WORK/cli-config.yaml"
export THE_LOOP_GH_WEBHOOK_SECRET="$SECRET"
START_NS="$(now_ns)"
"$BIN" start --foreground 2>"$WORK/service.err" &
SERVICE_PID=$!
until curl -fsS -o /dev/null "http://127.0.0.1:$PORT/health" 2>/dev/null; do
  kill -0 "$SERVICE_PID" 2>/dev/null || { cat "$WORK/service.err" >&2; exit 1; }
  sleep 0.002
done
FIRST_HEALTH_MS="$(( ($(now_ns) - START_NS) / 1000000 ))"
sleep 1
IDLE_KB="$(rss_kb "$SERVICE_PID")"

echo "receiver pid $SERVICE_PID on 127.0.0.1:$PORT, state root $STATE"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$WORK/deliveries.lua" \
  "http://127.0.0.1:$PORT/gh-webhook" | tee "$WORK/wrk.out"
AFTER_KB="$(rss_kb "$SERVICE_PID")"

if grep -qE 'Non-2xx' "$WORK/wrk.out"; then
  echo "warning: some answers were not 202 (see above)" >&2
fi
REQUESTS="$(awk '/requests in/ {print $1}' "$WORK/wrk.out")"
echo
echo "first /health 200 after start: ${FIRST_HEALTH_MS} ms (includes process spawn; curl polls every 2 ms)"
echo "RSS idle: $((IDLE_KB / 1024)).$(( (IDLE_KB % 1024) * 10 / 1024 )) MB; after ${REQUESTS} requests: $((AFTER_KB / 1024)).$(( (AFTER_KB % 1024) * 10 / 1024 )) MB"
kill -TERM "$SERVICE_PID"
wait "$SERVICE_PID" || true
SERVICE_PID=""
python3 - "$STATE/local/inbox" <<'PY'
import glob, json, sys
received, processed = set(), set()
for path in sorted(glob.glob(f"{sys.argv[1]}/journal-*.log")):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        end = data.find(b"\n", at)
        if end < 0:
            break
        try:
            header = json.loads(data[at:end])
        except ValueError:
            break
        at = end + 1
        if header["op"] == "received":
            received.add(header["seq"])
            at += header["len"] + 1
        else:
            processed.add(header["seq"])
print(f"deliveries left unprocessed in the journal at stop (replayed at the next start): {len(received - processed)}")
PY
