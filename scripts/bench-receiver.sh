#!/usr/bin/env bash
# Webhook receiver load: signed `issue_comment` deliveries with distinct delivery ids,
# driven by wrk at a running `the-loop start --foreground` (release build).
# Budget (SPEC §7): >= 20 x 756 req/s with p99 <= 2 ms (wrk, 2 threads, 16 connections,
# loopback); RSS <= 15 MB idle and <= 25 MB after 100k requests; first /health <= 20 ms
# median.
#
# A 202 is answered once the inbox journal's write(2) holds the delivery (a kill -9 of
# the service loses nothing); the fdatasync follows behind on its own thread, so the
# disk under the state root shows in the sync rate, not in the latency. STATE_DIR picks
# that disk (default: a temp dir under target/, i.e. the project's disk;
# STATE_DIR=/dev/shm/... for tmpfs).
#
# Printed: wrk's latency distribution and req/s with the ratio to the reference's 756
# req/s; the median time from spawn to the first /health 200 over HEALTH_STARTS starts
# (a Python prober connecting every 0.5 ms, so no curl start-up is counted); RSS idle and
# after the run; how fast the processor works off the backlog the run left (deliveries
# per second over PROCESS_WINDOW seconds after wrk stopped, read from GET /metrics); the
# load average at the start and the end (other builds share the cores).
#
# Environment: DURATION (wrk -d, default 10s), THREADS (2), CONNECTIONS (16),
# HEALTH_STARTS (20), PROCESS_WINDOW (5), STATE_DIR, BIN (a prebuilt binary; default:
# build target/release/the-loop).
# Needs: wrk (apt-get install wrk), python3, curl.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${DURATION:-10s}"
THREADS="${THREADS:-2}"
CONNECTIONS="${CONNECTIONS:-16}"
HEALTH_STARTS="${HEALTH_STARTS:-20}"
PROCESS_WINDOW="${PROCESS_WINDOW:-5}"
REFERENCE_RPS=756
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
load() { cut -d' ' -f1-3 /proc/loadavg; }
inbox_depth() {
  curl -fsS "http://127.0.0.1:$PORT/metrics" | awk '/^the_loop_inbox_depth/ {print $2; exit}'
}

export THE_LOOP_CLI_CONFIG="$WORK/cli-config.yaml"
export THE_LOOP_GH_WEBHOOK_SECRET="$SECRET"
LOAD_BEFORE="$(load)"

# Start-up: spawn → first /health 200, median over HEALTH_STARTS starts (each stopped
# with TERM before the next).
python3 - "$PORT" "$HEALTH_STARTS" "$BIN" start --foreground > "$WORK/health.out" <<'PY'
import socket, statistics, subprocess, sys, time
port, runs, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
def healthy():
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(request)
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False
times = []
for _ in range(runs):
    started = time.perf_counter()
    service = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not healthy():
        if service.poll() is not None:
            sys.exit(f"the service exited ({service.returncode}) before answering /health")
        time.sleep(0.0005)
    times.append((time.perf_counter() - started) * 1000)
    service.terminate()
    service.wait()
print(f"median {statistics.median(times):.1f} ms over {runs} starts "
      f"(min {min(times):.1f}, max {max(times):.1f})")
PY

"$BIN" start --foreground 2>"$WORK/service.err" &
SERVICE_PID=$!
until curl -fsS -o /dev/null "http://127.0.0.1:$PORT/health" 2>/dev/null; do
  kill -0 "$SERVICE_PID" 2>/dev/null || { cat "$WORK/service.err" >&2; exit 1; }
  sleep 0.002
done
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
RPS="$(awk '/^Requests\/sec/ {print $2}' "$WORK/wrk.out")"
# The processor works off what the run left, now without HTTP load.
DEPTH_BEFORE="$(inbox_depth)"
sleep "$PROCESS_WINDOW"
DEPTH_AFTER="$(inbox_depth)"
LOAD_AFTER="$(load)"
echo
echo "req/s: $RPS = $(awk -v r="$RPS" -v ref="$REFERENCE_RPS" 'BEGIN {printf "%.1f", r / ref}') x the reference's $REFERENCE_RPS req/s (budget: 20 x)"
echo "first /health 200 after spawn: $(cat "$WORK/health.out")"
echo "RSS idle: $((IDLE_KB / 1024)).$(( (IDLE_KB % 1024) * 10 / 1024 )) MB; after ${REQUESTS} requests: $((AFTER_KB / 1024)).$(( (AFTER_KB % 1024) * 10 / 1024 )) MB"
echo "processing after the run: inbox depth $DEPTH_BEFORE -> $DEPTH_AFTER in ${PROCESS_WINDOW} s = $(( (DEPTH_BEFORE - DEPTH_AFTER) / PROCESS_WINDOW )) deliveries/s$([[ "$DEPTH_AFTER" == 0 ]] && echo " (at least: the backlog ran out)")"
echo "load average: before $LOAD_BEFORE; after $LOAD_AFTER"
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
