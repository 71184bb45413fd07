// The dashboard's entry: the hash routes (`#/` the board, `#/needs-you`, `#/item/<ref>`),
// one refresh that reads the board's answers and draws the current view, the header
// (the "Needs you" count, the ingresses, how updates arrive), the confirmation every
// action passes through, and the token form when the service asks for a token.

import { ApiError, get, post, setToken } from './api.js';
import { daemonChips, renderBoard, renderNeedsYou } from './board.js';
import { fill, h } from './dom.js';
import { renderItem } from './item.js';
import { watch } from './live.js';
import { needsYou } from './model.js';

const view = document.getElementById('view');

function route() {
  const item = /^#\/item\/(.+)$/.exec(location.hash);
  if (item) return { name: 'item', ref: decodeURIComponent(item[1]) };
  if (location.hash === '#/needs-you') return { name: 'needs-you' };
  return { name: 'board' };
}

/** Asks the operator to confirm `title`; resolves to whether they did. */
function confirm(title, text) {
  const dialog = document.getElementById('confirm');
  fill(document.getElementById('confirm-title'), title);
  fill(document.getElementById('confirm-text'), text);
  return new Promise((resolve) => {
    const ok = document.getElementById('confirm-ok');
    const cancel = document.getElementById('confirm-cancel');
    const done = (answer) => {
      ok.removeEventListener('click', yes);
      cancel.removeEventListener('click', no);
      dialog.removeEventListener('cancel', no);
      dialog.close();
      resolve(answer);
    };
    const yes = () => done(true);
    const no = () => done(false);
    ok.addEventListener('click', yes);
    cancel.addEventListener('click', no);
    dialog.addEventListener('cancel', no);
    dialog.showModal();
  });
}

let running = false;
let again = false;

/** Reads the board's answers and draws the current view; calls made meanwhile run once after. */
async function refresh() {
  if (running) {
    again = true;
    return;
  }
  running = true;
  try {
    const [records, sessions, attention, daemons] = await Promise.all([
      get('/api/v1/work-items'),
      get('/api/v1/sessions'),
      get('/api/v1/attention'),
      get('/api/v1/daemons').catch(() => []),
    ]);
    const graphs = await graphChecks(records, sessions);
    const data = { records, sessions, attention, daemons, graphs };
    header(data);
    const now = route();
    if (now.name === 'item') await renderItem(view, now.ref, data, { confirm, refresh });
    else if (now.name === 'needs-you') renderNeedsYou(view, data);
    else renderBoard(view, data);
    document.body.dataset.loaded = 'true';
  } catch (err) {
    trouble(err);
  } finally {
    running = false;
    if (again) {
      again = false;
      refresh();
    }
  }
}

/** How many graph checks run at once. */
const CHECKS_AT_ONCE = 4;

/**
 * The join's second round: the graph of each live session's work item, in its checkout
 * (`/graph/check`), by ref. An item with no graph driven there has none (a refusal is
 * not an error here).
 */
async function graphChecks(records, sessions) {
  const byRef = new Map((records || []).map((r) => [r.ref, r]));
  const live = (sessions || []).filter((s) => (s.status === 'active' || s.status === 'paused') && s.cwd);
  const graphs = new Map();
  let next = 0;
  const worker = async () => {
    while (next < live.length) {
      const session = live[next++];
      const workItem = byRef.get(session.ref)?.graph?.workItem || `issue-${session.workItem?.number}`;
      try {
        graphs.set(session.ref, await post('/api/v1/graph/check', { repo: session.cwd, workItem, ref: session.ref }));
      } catch {
        // No graph driven for it there.
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CHECKS_AT_ONCE, live.length) }, worker));
  return graphs;
}

function header(data) {
  fill(document.getElementById('needs-count'), needsYou(data).length);
  fill(document.getElementById('daemon-chips'), daemonChips(data.daemons));
  const now = route().name;
  for (const link of document.querySelectorAll('[data-nav]')) {
    link.toggleAttribute('aria-current', link.dataset.nav === (now === 'item' ? 'board' : now));
  }
}

function trouble(err) {
  if (err instanceof ApiError && err.status === 401) return tokenForm(err.message);
  fill(
    view,
    h('div', { class: 'trouble', role: 'alert' }, h('h1', 'The control plane did not answer'), h('p', err.message)),
  );
}

function tokenForm(why) {
  if (view.querySelector('form.token')) return; // being filled in: a refresh keeps it
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', required: true });
  fill(
    view,
    h(
      'form',
      {
        class: 'token',
        onsubmit: (event) => {
          event.preventDefault();
          setToken(input.value.trim());
          location.reload();
        },
      },
      h('h1', 'This service wants a token'),
      h('p', why),
      h('label', 'Token (the value of the variable `service.tokenEnv` names)', input),
      h('button', { type: 'submit', class: 'primary' }, 'Use it'),
      h('p', { class: 'muted small' }, 'Kept in this tab only.'),
    ),
  );
}

function setLive(mode, text) {
  const chip = document.getElementById('live-chip');
  chip.dataset.mode = mode;
  fill(chip, text);
}

window.addEventListener('hashchange', () => {
  window.scrollTo(0, 0);
  refresh();
});
refresh();
watch(refresh, setLive);
