// Live updates. The primary path is the event stream, `GET /api/v1/stream` (Server-Sent
// Events): every `log` frame (one event-log line) means something changed, so the view
// refreshes — frames are coalesced for a moment into one refresh — and a `desync` frame
// (the service could not resume where this tab left off) refreshes at once. When the
// stream cannot be had — the service does not serve it (404), it refused or failed five
// times in a row, or the service wants a token, which EventSource cannot send — the
// page polls instead. The chip in the header says which.

import { token } from './api.js';

/** How often the page refreshes when it polls. */
export const POLL_SECONDS = 5;
/** How long frames are gathered into one refresh. */
const COALESCE_MS = 250;
/** Consecutive stream errors after which the page polls instead. */
const GIVE_UP_AFTER = 5;

/**
 * Calls `refresh()` whenever something may have changed, and `status(mode, text)` when
 * the way it learns that changes (`live`, `connecting`, `polling`).
 */
export function watch(refresh, status) {
  let pending = null;
  const soon = () => {
    if (pending) return;
    pending = setTimeout(() => {
      pending = null;
      refresh();
    }, COALESCE_MS);
  };
  const poll = (why) => {
    status('polling', `${why} · polling every ${POLL_SECONDS}s`);
    setInterval(refresh, POLL_SECONDS * 1000);
  };
  if (!('EventSource' in window)) return poll('no stream in this browser');
  if (token()) return poll('the stream cannot send a token');
  let failures = 0;
  let opened = false;
  const stream = new EventSource('/api/v1/stream');
  status('connecting', 'stream · connecting');
  stream.addEventListener('open', () => {
    // A reconnect may have missed lines the resume could not replay: catch up once.
    if (opened || failures > 0) refresh();
    opened = true;
    failures = 0;
    status('live', 'live');
  });
  stream.addEventListener('log', soon);
  stream.addEventListener('desync', refresh);
  stream.addEventListener('error', () => {
    failures += 1;
    if (stream.readyState === EventSource.CLOSED || failures >= GIVE_UP_AFTER) {
      stream.close();
      poll('stream unavailable');
    } else {
      status('connecting', `stream · reconnecting (${failures})`);
    }
  });
}
