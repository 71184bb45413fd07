#!/usr/bin/env bash
# GitHub requests per poll cycle, counted by the simulated GitHub's request log, for
# 3 repositories, 10 labelled issues and 4 labelled pull requests, beside the reference's
# 2S + I + 3P `gh` processes per cycle.
# Budget (SPEC §7, issue 7): a quiet cycle makes exactly S = 3 requests, all 304; a cycle
# after one new comment makes at most S + 3.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --quiet -p loop-daemon --bench poll_requests
