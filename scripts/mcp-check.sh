#!/usr/bin/env bash
# Drives the-loop's MCP server with the official Python SDK (PyPI `mcp`), a client
# written by other people than ours: starts a service with only the webhook receiver and
# the control plane on free ports over an empty state root, runs scripts/mcp_check.py
# against `/mcp`, stops the service. Run by .ci/run; needs python3 with venv.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/service.sh

cargo build --quiet -p the-loop
work="$(mktemp -d)"
trap 'stop_service; rm -rf "$work"' EXIT
venv="$(python_venv mcp 'mcp>=2,<3')"

write_service_config "$work"
start_service "$work" "$api_port"
"$venv/bin/python" scripts/mcp_check.py "http://127.0.0.1:$api_port/mcp" || {
  echo "mcp-check: failed; the service said:" >&2
  cat "$work/service.out" >&2
  exit 1
}
