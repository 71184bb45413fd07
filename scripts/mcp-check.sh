#!/usr/bin/env bash
# Drives the-loop's MCP server with the official Python SDK (PyPI `mcp`), a client
# written by other people than ours: starts a service with only the webhook receiver and
# the control plane on free ports over an empty state root, runs scripts/mcp_check.py
# against `/mcp`, stops the service. Run by .ci/run; needs python3 with venv.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet -p the-loop
bin="${CARGO_TARGET_DIR:-target}/debug/the-loop"
work="$(mktemp -d)"
stop() {
  if [ -n "${service_pid:-}" ]; then
    kill "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap stop EXIT

venv="${CARGO_TARGET_DIR:-target}/mcp-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet 'mcp>=2,<3'
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
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
THE_LOOP_GH_WEBHOOK_SECRET=mcp-check "$bin" --config "$work/cli-config.yaml" start --foreground \
  >"$work/service.out" 2>&1 &
service_pid=$!
for _ in $(seq 1 150); do
  curl -fs "http://127.0.0.1:$api_port/api/v1/health" >/dev/null 2>&1 && break
  sleep 0.1
done
"$venv/bin/python" scripts/mcp_check.py "http://127.0.0.1:$api_port/mcp" || {
  echo "mcp-check: failed; the service said:" >&2
  cat "$work/service.out" >&2
  exit 1
}
