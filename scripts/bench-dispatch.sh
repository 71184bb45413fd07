#!/usr/bin/env bash
# Dispatch latency: a signed issue_comment webhook POSTed to the real receiver until the
# stand-in harness in the work item's live tmux session has recorded the message.
# Two worlds side by side, comments alternating: a session in a plain working directory
# (no graph) and one in the item's clone driving its process graph at an agent node.
# p50/p99/max of each over 200 events after 10 warm-up events (release build), and the ratio.
# Budget (SPEC §7): p50 <= 5 ms, p99 <= 10 ms. The load average is printed with the numbers.
# Needs: tmux, git.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p loop-sim --bin loop-stand-in
export LOOP_STAND_IN="${CARGO_TARGET_DIR:-$PWD/target}/release/loop-stand-in"
cargo bench --quiet -p loop-daemon --bench dispatch
