# Sourced by the scripts that check a running service with someone else's client
# (scripts/mcp-check.sh, scripts/api-contract.sh, scripts/bench-api.sh,
# scripts/bench-dashboard.sh): a Python venv under target/ with a pinned package, free
# loopback ports, the service's config, and the-loop's service started in the
# foreground on it, stopped on exit.

bin="${CARGO_TARGET_DIR:-target}/debug/the-loop"

# python_venv NAME SPEC...: a venv `target/NAME-venv` holding SPEC (pip requirement
# strings), made or remade when SPEC changed; prints its directory.
python_venv() {
  local name="$1"
  shift
  local venv="${CARGO_TARGET_DIR:-target}/$name-venv"
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.spec" 2>/dev/null)" != "$*" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet "$@" >&2
    echo "$*" > "$venv/.spec"
  fi
  echo "$venv"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# write_service_config WORK [SERVICE_YAML]: WORK/cli-config.yaml for a service over the
# state root WORK/state with its webhook receiver and control plane on free loopback
# ports (the control plane's in $api_port); SERVICE_YAML, lines indented two spaces, is
# added to the `service:` section.
write_service_config() {
  local work="$1" service="${2:-}"
  api_port="$(free_port)"
  cat > "$work/cli-config.yaml" <<YAML
state:
  root: $work/state
webhooks:
  ghWebhook:
    enabled: true
    port: $(free_port)
service:
  port: $api_port
$service
YAML
}

# start_service WORK API_PORT: runs `the-loop start --foreground` on WORK/cli-config.yaml
# (its output in WORK/service.out, its tmux server private under WORK) and waits for the
# control plane's health on API_PORT.
start_service() {
  local work="$1" port="$2"
  TMUX_TMPDIR="$work" THE_LOOP_GH_WEBHOOK_SECRET=check \
    "$bin" --config "$work/cli-config.yaml" start --foreground \
    >"$work/service.out" 2>&1 &
  service_pid=$!
  for _ in $(seq 1 150); do
    curl -fs "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "the service did not answer on port $port; it said:" >&2
  cat "$work/service.out" >&2
  return 1
}

# stop_service: stops what start_service started and waits for it (a shutdown still
# writing its last lines would make the caller's clean-up fail).
stop_service() {
  if [ -n "${service_pid:-}" ]; then
    kill "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
    service_pid=
  fi
}
