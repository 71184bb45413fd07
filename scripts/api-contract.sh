#!/usr/bin/env bash
# The control plane's contract, checked by a client written by other people than ours:
# schemathesis (PyPI) reads the service's own `/api/openapi.json`, generates requests
# for every operation — valid and invalid — and checks each answer against the document
# (documented status, content type, headers, response schema, no 5xx). The service runs
# with its webhook receiver and control plane on free ports over a scripted state root:
# portable records (armed, paused), a paused session, a few event lines; GitHub is a
# closed port, so whatever would post a comment fails fast and says so, and nothing is
# spawned (`spawnOnUnmatched: never`), so a generated `start` is refused at once.
# `/api/v1/stream` (an answer that never ends) and `/mcp` (checked by mcp-check.sh) are
# left out; scripts/schemathesis.toml says which refusals of schema-valid requests are the
# contract (the graph routes'). Run by .ci/run; needs python3 with venv. EXAMPLES
# (default 25) per operation.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/service.sh

cargo build --quiet -p the-loop
work="$(mktemp -d)"
trap 'stop_service; rm -rf "$work"' EXIT
venv="$(python_venv schemathesis 'schemathesis>=4.32,<5')"
venv="$(realpath "$venv")"

hook_port="$(free_port)"
api_port="$(free_port)"
github_port="$(free_port)"
cat > "$work/cli-config.yaml" <<YAML
state:
  root: $work/state
routing:
  authorizedUsers: [octocat]
  spawnOnUnmatched: never
webhooks:
  ghWebhook:
    enabled: true
    port: $hook_port
integrations:
  github:
    api:
      baseUrl: http://127.0.0.1:$github_port
service:
  port: $api_port
YAML

# The world: two portable records, a paused Claude Code session, a few lines.
mkdir -p "$work/state/portable" "$work/state/local" "$work/state/logs" "$work/work"
cat > "$work/state/portable/github-octo-app-7.json" <<JSON
{"ref": "github:octo/app#7", "url": "https://github.com/octo/app/issues/7",
 "control": {"command": "pause", "source": "cli", "actor": "octocat", "requestedAt": "2026-11-29T10:00:00Z"}}
JSON
cat > "$work/state/portable/github-octo-app-8.json" <<JSON
{"ref": "github:octo/app#8", "url": "https://github.com/octo/app/issues/8",
 "control": {"command": "start", "source": "comment", "actor": "octocat", "requestedAt": "2026-11-29T10:01:00Z"}}
JSON
cat > "$work/state/local/github-octo-app-7.json" <<JSON
{"ref": "github:octo/app#7", "endpoints": {"github:octo/app#7": {
  "harness": "claude", "harnessSessionId": "conv-1", "cwd": "$work/work",
  "tmuxTarget": "loop-github-octo-app-7", "status": "paused", "recentDeliveries": ["d-1"],
  "createdAt": "2026-11-29T10:00:00Z"}}}
JSON
cat > "$work/state/logs/events.jsonl" <<JSONL
{"ts":"2026-11-29T10:00:00.000Z","source":"gh-webhook","event":"webhook.received","level":"info","pid":1,"delivery_id":"d-1","work_item":"github:octo/app#7"}
{"ts":"2026-11-29T10:00:01.000Z","source":"service","event":"dispatch.failed","level":"error","pid":1,"delivery_id":"d-1","work_item":"github:octo/app#7","error":"scripted"}
JSONL

start_service "$work" "$api_port"
sessions="$(curl -fs "http://127.0.0.1:$api_port/api/v1/sessions")"
case "$sessions" in
  *'"status":"paused"'*) ;;
  *) echo "api-contract: the scripted session is not listed: $sessions" >&2; exit 1 ;;
esac

# From the scratch directory: schemathesis keeps its cache (`.schemathesis/`) in its cwd.
config="$(realpath scripts/schemathesis.toml)"
(cd "$work" && "$venv/bin/schemathesis" --config-file "$config" run "http://127.0.0.1:$api_port/api/openapi.json" \
  --checks all \
  --exclude-path /api/v1/stream --exclude-path /mcp \
  --max-examples "${EXAMPLES:-25}" \
  --generation-deterministic \
  --request-timeout 20 \
  --suppress-health-check all \
  --no-color) || {
  echo "api-contract: the service's answers do not keep its document; it said:" >&2
  tail -50 "$work/service.out" >&2
  exit 1
}
