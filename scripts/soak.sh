#!/usr/bin/env bash
# The soak (issue #16, SPEC §8): EVENTS comments (default 100 000) through both ingresses
# at once — each delivered by the simulator's signed webhook and found by the poller every
# second — into 20 live sessions of the real service (release build) on real tmux, with
# the stand-in agent. Fails if any comment is not pasted exactly once. Samples every 2 000
# comments the service's RSS, its open file descriptors and the event log's size on disk
# (live + rotated, bounded by rotation at 10 MiB × 6), one JSON line each, into
# target/soak.jsonl, then prints them and the first/last comparison. An item is closed and
# replaced once its thread holds THREAD_LENGTH comments (default 200, the length of real
# threads); a long THREAD_LENGTH measures what long threads cost instead.
#   scripts/soak.sh [EVENTS] [THREAD_LENGTH]
# Needs: tmux. Takes roughly EVENTS / 50 seconds on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
events="${1:-100000}"
thread_length="${2:-200}"
report="$PWD/target/soak.jsonl"
mkdir -p target
echo "soak: $events comments, threads of $thread_length, report in $report (one line per 2 000)" >&2
SOAK_EVENTS="$events" SOAK_THREAD_LENGTH="$thread_length" SOAK_REPORT="$report" nice -n 10 cargo test --release --quiet -p the-loop --test it -- \
  --ignored --exact soak::soak_comments_through_both_ingresses_reach_their_sessions_once_with_flat_resources
cat "$report"
python3 - "$report" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
# The second sample is the first under load; the last is after the drain.
first, last = rows[1], rows[-1]
for key, unit in (("rssKb", "kB"), ("fds", ""), ("eventLogBytes", "B")):
    print(f"{key}: {first[key]} {unit} at {first['posted']} comments -> {last[key]} {unit} at {last['posted']}"
          f" (max {max(r[key] for r in rows)})")
PY
