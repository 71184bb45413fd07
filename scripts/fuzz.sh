#!/usr/bin/env bash
# Fuzz one input boundary, or all of them one after another, each for a bounded time;
# exits non-zero as soon as libFuzzer finds a crash (its input is left under
# fuzz/artifacts/<target>/). Runs on the stable toolchain (RUSTC_BOOTSTRAP=1 lets
# cargo-fuzz pass its nightly flags). See docs/fuzzing.md.
# Usage: scripts/fuzz.sh [TARGET|all] [SECONDS] [SANITIZER]
#   defaults: all, 60 s per target, address (`none` builds faster; CI uses it)
# Targets: webhook_delivery config state_files api_responses pane_screen
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
TARGETS=(webhook_delivery config state_files api_responses pane_screen)
WHICH="${1:-all}"
SECONDS_TO_RUN="${2:-60}"
SANITIZER="${3:-address}"
command -v cargo-fuzz >/dev/null || { echo "error: cargo-fuzz is not installed (cargo install --locked cargo-fuzz)" >&2; exit 2; }
if [[ "$WHICH" == all ]]; then
    selected=("${TARGETS[@]}")
elif [[ " ${TARGETS[*]} " == *" $WHICH "* ]]; then
    selected=("$WHICH")
else
    echo "error: unknown target \`$WHICH\`; one of: ${TARGETS[*]} all" >&2
    exit 2
fi
export RUSTC_BOOTSTRAP=1
# One build for the selected targets (all of them in one cargo run: they share their
# dependencies), at low priority.
echo "== building: ${selected[*]} (sanitizer: $SANITIZER)" >&2
if [[ "$WHICH" == all ]]; then
    nice -n 10 cargo fuzz build --sanitizer "$SANITIZER"
else
    nice -n 10 cargo fuzz build --sanitizer "$SANITIZER" "$WHICH"
fi
for target in "${selected[@]}"; do
    mkdir -p "corpus/$target" "artifacts/$target"
    committed=()
    for kind in seeds regressions; do
        [[ -d "$kind/$target" ]] && committed+=("$kind/$target")
    done
    echo "== $target: ${SECONDS_TO_RUN} s" >&2
    # The grown corpus comes first: new inputs are written there, never into the
    # committed directories.
    nice -n 10 cargo fuzz run --sanitizer "$SANITIZER" "$target" "corpus/$target" "${committed[@]}" -- \
        -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 -artifact_prefix="artifacts/$target/"
done
