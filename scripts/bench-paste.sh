#!/usr/bin/env bash
# Paste-delivery latency: event text in -> message recorded by the stand-in harness,
# p50/p99 over 200 deliveries into a live session on a private tmux server.
# Budget (SPEC §7): <= 5 ms p50, <= 10 ms p99.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p loop-sim --bin loop-stand-in
LOOP_STAND_IN="$PWD/target/release/loop-stand-in" cargo bench --quiet -p loop-sessions --bench paste
