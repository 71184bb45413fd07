#!/usr/bin/env bash
# GitHub requests per poll cycle, counted by the simulated GitHub's request log, for
# 3 repositories, 10 labelled issues and 4 labelled pull requests, beside the reference's
# 2S + I + 3P `gh` processes per cycle: the first cycle ever, the first cycle of a
# restarted poller (warm from local/poll-cache.json), a quiet cycle, one new comment.
# Budget (SPEC §7, issue 7): a quiet cycle — including the first after a restart — makes
# exactly S = 3 requests, all 304; a cycle after one new comment makes at most S + 3.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --quiet -p loop-daemon --bench poll_requests
