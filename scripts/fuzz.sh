#!/usr/bin/env bash
# Fuzz one input boundary, or all of them one after another, each for a bounded time;
# exits non-zero as soon as libFuzzer finds a crash (its input is left under
# fuzz/artifacts/<target>/). See docs/fuzzing.md.
# Usage: scripts/fuzz.sh [TARGET|all] [SECONDS]   (default: all, 60 s per target)
# Targets: webhook_delivery config state_files api_responses
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
TARGETS=(webhook_delivery config state_files api_responses)
WHICH="${1:-all}"
SECONDS_TO_RUN="${2:-60}"
command -v cargo-fuzz >/dev/null || { echo "error: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2; exit 2; }
if [[ "$WHICH" == all ]]; then
    selected=("${TARGETS[@]}")
elif [[ " ${TARGETS[*]} " == *" $WHICH "* ]]; then
    selected=("$WHICH")
else
    echo "error: unknown target \`$WHICH\`; one of: ${TARGETS[*]} all" >&2
    exit 2
fi
# Sanitizer builds are heavy: build and run one target at a time, at low priority.
for target in "${selected[@]}"; do
    mkdir -p "corpus/$target" "artifacts/$target"
    seeds=()
    [[ -d "seeds/$target" ]] && seeds=("seeds/$target")
    echo "== $target: ${SECONDS_TO_RUN} s" >&2
    nice -n 10 cargo +nightly fuzz run "$target" "corpus/$target" "${seeds[@]}" -- \
        -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1
done
