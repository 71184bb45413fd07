#!/usr/bin/env bash
# Fuzz the webhook receiver's decision (raw body + headers -> admit -> judge) for a
# bounded time; exits non-zero if libFuzzer finds a panic. See docs/fuzzing.md.
# Usage: scripts/fuzz-receiver.sh [SECONDS]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
SECONDS_TO_RUN="${1:-60}"
command -v cargo-fuzz >/dev/null || { echo "error: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2; exit 2; }
cargo +nightly fuzz run webhook_delivery -- -max_total_time="$SECONDS_TO_RUN"
