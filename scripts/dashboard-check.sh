#!/usr/bin/env bash
# The dashboard in a real browser: a scripted world — the simulated GitHub (`the-loop
# sim`), the real service polling it (`the-loop start --foreground`, control plane on a
# free port) and a real tmux session running the stand-in agent — then headless Chromium
# driven by Playwright (scripts/dashboard_check.mjs): the board shows the started item,
# a new comment appears on its page without a reload, a pause from the page (confirmed)
# moves it to "Needs you" and `the-loop sessions show` agrees; its session runs in a clone
# of the repository, so its process graph waits at the human gate `phase-selection`,
# which "Needs you" shows, its page's "Approve" asks again, and an authorized `the-loop
# execute` passes; a phone-sized viewport does not overflow. Screenshots land in target/dashboard/. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
# shellcheck source=scripts/browser-setup.sh
. scripts/browser-setup.sh
browser_setup
cargo build --quiet -p the-loop
bin="$(cd "$target/debug" && pwd)/the-loop"
shots="$(mkdir -p "$target/dashboard" && cd "$target/dashboard" && pwd)"

work="$(mktemp -d)"
export HOME="$work/home" CLAUDE_CONFIG_DIR="$work/home/.claude" TMUX_TMPDIR="$work/tmux"
export GH_TOKEN=dashboard-check USER=alice
mkdir -p "$HOME" "$TMUX_TMPDIR" "$work/bin" "$work/spawn"
stop() {
  for pid in ${service_pid:-} ${sim_pid:-}; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  tmux kill-server 2>/dev/null || true
  rm -rf "$work"
}
trap stop EXIT

# The agent every session runs: the stand-in, recording what it is sent.
cat > "$work/bin/claude" <<SH
#!/bin/sh
exec "$bin" stand-in-harness --record "$work/agent.jsonl" "\$@"
SH
chmod +x "$work/bin/claude"
export PATH="$work/bin:$PATH"

"$bin" sim --seed-repo octo/app >"$work/sim.url" 2>"$work/sim.err" &
sim_pid=$!
for _ in $(seq 1 100); do [ -s "$work/sim.url" ] && break; sleep 0.1; done
sim="$(head -n1 "$work/sim.url")"
act() { curl -fsS -X POST -H 'Content-Type: application/json' -d "$1" "$sim/_sim/actions" >/dev/null; }

# The repository every session checks out: a bare `octo/app` with one commit, so the
# item's session runs in a clone of it and its process graph is driven there.
git init -q -b main "$work/seed"
echo "# octo/app" > "$work/seed/README.md"
git -C "$work/seed" add README.md
git -C "$work/seed" -c user.name=check -c user.email=check@example.com commit -q -m initial
git clone -q --bare "$work/seed" "$work/git/octo/app.git"

api_port="$(free_port)"
config="$work/cli-config.yaml"
cat > "$config" <<YAML
state:
  root: $work/state
repositories: [octo/app]
routing:
  enabled: true
  authorizedUsers: [alice]
  spawnOnUnmatched: labeled
  spawnWorkdir: $work/spawn
  harnessTrust:
    enabled: false
  workspace:
    root: $work/workspaces
    strategy: clone
    cloneUrls:
      - host: github.com
        base: file://$work/git
polling:
  enabled: true
  intervalSeconds: 1
service:
  port: $api_port
integrations:
  github:
    api:
      baseUrl: $sim
YAML
"$bin" --config "$config" start --foreground >"$work/service.out" 2>&1 &
service_pid=$!
dashboard="http://127.0.0.1:$api_port/"
for _ in $(seq 1 150); do
  curl -fs "${dashboard}api/v1/health" >/dev/null 2>&1 && break
  sleep 0.1
done

# alice files the issue and starts it; the check begins once its session runs.
act '{"action":"open_issue","repo":"octo/app","author":"alice","title":"Fix the parser <img src=x onerror=alert(1)>","labels":["the-loop: auto-execute"]}'
act '{"action":"comment","repo":"octo/app","number":1,"author":"alice","body":"the-loop start"}'
for _ in $(seq 1 300); do
  curl -fs "${dashboard}api/v1/sessions/one?ref=github:octo/app%231" 2>/dev/null | grep -q '"status":"active"' && break
  sleep 0.1
done

export DASHBOARD_URL="$dashboard" SIM_URL="$sim" THE_LOOP="$bin" THE_LOOP_CONFIG="$config" SHOTS="$shots"
NODE_PATH="$BROWSER_NODE_PATH" node scripts/dashboard_check.mjs || {
  echo "dashboard-check: failed; the service said:" >&2
  cat "$work/service.out" >&2
  exit 1
}
