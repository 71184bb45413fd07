#!/usr/bin/env bash
# SPEC §8 crash soak: `kill -9` the real service (receiver + poller, real dispatcher,
# tmux, stand-in harness) at random points while comments flow through both ingresses,
# over many seeds, and tally what each run found.
#
#   scripts/soak-kill.sh [RUNS] [ci|soak|webhooks]
#
# RUNS (default 10) seeds, each a fresh run; `ci` is the bounded 300-comment test, `soak`
# (default) the 1 000-comment one, `webhooks` the 300-comment one with the receiver
# alone. Each run appends one JSON line (seed, kills, duplicates, losses, the comments
# concerned) to target/soak-kill.jsonl; a failing run's seed replays with
# THE_LOOP_KILL_SEED=<seed>. Exit 1 if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10}"
case "${2:-soak}" in
  ci) test=a_service_killed_at_random_points_during_300_comments_delivers_each_authorized_comment_once ;;
  soak) test=soak_a_service_killed_at_random_points_during_1000_comments_delivers_each_authorized_comment_once ;;
  webhooks) test=a_webhooks_only_service_killed_at_random_points_delivers_each_acknowledged_comment_once ;;
  *) echo "usage: $0 [RUNS] [ci|soak|webhooks]" >&2; exit 2 ;;
esac
report="$PWD/target/soak-kill.jsonl"
: > "$report"
cargo test --quiet -p the-loop --test it --no-run
failed=0
for run in $(seq 1 "$runs"); do
  if THE_LOOP_KILL_REPORT="$report" cargo test --quiet -p the-loop --test it -- \
      --exact "kill::$test" --include-ignored >"target/soak-kill-$run.out" 2>&1; then
    echo "run $run: ok"
  else
    failed=$((failed + 1))
    echo "run $run: FAILED (target/soak-kill-$run.out)"
  fi
done
echo "--- $runs runs, $failed failed; per run:"
cat "$report"
if command -v jq >/dev/null; then
  jq -s '{runs: length, kills: (map(.kills) | add), duplicates: (map(.duplicates) | add), losses: (map(.losses) | add)}' "$report"
fi
[ "$failed" -eq 0 ]
