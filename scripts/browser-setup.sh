# Sourced by the scripts that drive the dashboard in a real browser: makes sure Debian's
# `chromium`, `node` and `curl` are installed (apt) and `playwright-core` (npm) is under
# `$target/dashboard-node`, then exports BROWSER_NODE_PATH (that `node_modules`) and
# defines `free_port`. Expects `target` (the cargo target directory) to be set.

browser_setup() {
  local need=()
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v node >/dev/null 2>&1 || need+=(nodejs)
  command -v npm >/dev/null 2>&1 || need+=(npm)
  command -v curl >/dev/null 2>&1 || need+=(curl)
  if [ ${#need[@]} -gt 0 ]; then
    echo "browser-setup: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  local prefix="$target/dashboard-node"
  if [ ! -d "$prefix/node_modules/playwright-core" ]; then
    echo "browser-setup: installing playwright-core under $prefix"
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --silent 'playwright-core@^1.49' >/dev/null
  fi
  BROWSER_NODE_PATH="$(cd "$prefix/node_modules" && pwd)"
  export BROWSER_NODE_PATH
}

# A TCP port free on 127.0.0.1 right now.
free_port() {
  node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'
}
