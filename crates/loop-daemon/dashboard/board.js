// The board (`#/`): "Needs you" first, then the work items in columns by state; and the
// whole "Needs you" list (`#/needs-you`). A column draws its newest `SHOWN` cards and
// says how many more there are (a click draws them all), so a state root of thousands
// of items paints as fast as one of a few.

import { ago, fill, h, itemHref, shortRef, when } from './dom.js';
import { STATES, board, needsYou, usageText } from './model.js';

const SHOWN = 50;
/** The columns whose every card was asked for. */
const expanded = new Set();

export function renderBoard(view, data) {
  const rows = board(data);
  const needs = needsYou(data);
  const columns = STATES.map((state) => ({ state, rows: rows.filter((r) => r.state === state.id) }))
    .filter((c) => c.state.id !== 'watched' || c.rows.length > 0);
  fill(
    view,
    needs.length > 0 &&
      h(
        'section',
        { class: 'needs', id: 'needs-you', 'aria-label': 'Needs you' },
        h('h2', 'Needs you ', h('span', { class: 'count' }, needs.length)),
        needsList(needs.slice(0, 5)),
        needs.length > 5 && h('p', h('a', { href: '#/needs-you' }, `all ${needs.length} →`)),
      ),
    rows.length === 0 &&
      h(
        'p',
        { class: 'empty' },
        'No work items yet. Label an issue `the-loop: auto-execute` in a watched repository and comment `the-loop start`.',
      ),
    h(
      'section',
      { class: 'board', 'aria-label': 'Work items by state' },
      columns.map(({ state, rows }) => column(view, data, state, rows)),
    ),
  );
  // The first paint, for scripts/bench-dashboard.sh.
  if (performance.getEntriesByName('board-painted').length === 0) performance.mark('board-painted');
}

function column(view, data, state, rows) {
  const all = expanded.has(state.id);
  const shown = all ? rows : rows.slice(0, SHOWN);
  return h(
    'div',
    { class: `column state-${state.id}${rows.length === 0 ? ' empty' : ''}`, 'data-state': state.id },
    h('h2', { title: state.hint }, state.label, ' ', h('span', { class: 'count' }, rows.length)),
    shown.length === 0 && h('p', { class: 'muted' }, 'none'),
    h('ul', { class: 'cards' }, shown.map(card)),
    shown.length < rows.length &&
      h(
        'button',
        {
          class: 'more',
          type: 'button',
          onclick: () => {
            expanded.add(state.id);
            renderBoard(view, data);
          },
        },
        `show ${rows.length - shown.length} more`,
      ),
  );
}

function card(row) {
  const session = row.session;
  const prs = session?.pullRequests || [];
  return h(
    'li',
    { class: 'card', 'data-ref': row.ref },
    h('a', { class: 'ref', href: itemHref(row.ref) }, shortRef(row.ref)),
    row.title && h('p', { class: 'title' }, row.title),
    row.question && h('p', { class: 'question' }, '“', row.question, '”'),
    row.graphWarning && h('p', { class: 'graph-warning', role: 'alert' }, row.graphWarning),
    h(
      'p',
      { class: 'meta' },
      row.position &&
        h(
          'span',
          { class: 'phase', title: row.position.phase ? `label loop:${row.position.phase}` : 'process graph node' },
          row.position.node,
        ),
      session?.harness && h('span', session.harness),
      session?.agentState &&
        h('span', { class: `agent agent-${session.agentState}`, title: agentTitle(session) }, session.agentState),
      prs.length > 0 && h('span', prs.map((pr) => shortRef(pr.ref)).join(', ')),
      row.usage && h('span', { class: 'usage', title: usageTitle(row.usage) }, usageText(row.usage)),
      row.activity && when(row.activity),
    ),
  );
}

/** The tokens by kind, on hover over the card's cost. */
function usageTitle(usage) {
  return `input ${usage.inputTokens}, output ${usage.outputTokens}, cache write ${usage.cacheWriteTokens}, cache read ${usage.cacheReadTokens}`;
}

/** What the agent's state badge says on hover: the dialog's tool and input, a limit's reset. */
function agentTitle(session) {
  if (session.permission) return `asks to run ${session.permission.tool} ${session.permission.input}`;
  if (session.limit) return session.limit.until ? `limited until ${session.limit.until}` : session.limit.notice;
  return `since ${session.agentStateSince || '?'}`;
}

export function renderNeedsYou(view, data) {
  const needs = needsYou(data);
  fill(
    view,
    h(
      'section',
      { class: 'needs', id: 'needs-you', 'aria-label': 'Needs you' },
      h('h1', 'Needs you'),
      needs.length === 0 ? h('p', { class: 'empty' }, 'Nothing needs you.') : needsList(needs),
    ),
  );
}

const ACTION = {
  'awaiting-input': 'Reply',
  'agent-waiting': 'Answer',
  'human-gate': 'Review',
  'session-paused': 'Resume or stop',
  'armed-without-session': 'Open',
  'recent-error': 'Explain',
};

function needsList(entries) {
  return h(
    'ul',
    { class: 'needs-list' },
    entries.map((entry) =>
      h(
        'li',
        { class: `need kind-${entry.kind}`, 'data-ref': entry.workItem, 'data-kind': entry.kind },
        h('span', { class: 'badge' }, entry.label),
        entry.workItem
          ? h('a', { class: 'ref', href: itemHref(entry.workItem) }, shortRef(entry.workItem))
          : h('span', { class: 'ref muted' }, 'the service'),
        h('span', { class: 'detail' }, entry.detail),
        entry.workItem && h('a', { class: 'action', href: itemHref(entry.workItem) }, ACTION[entry.kind] || 'Open'),
      ),
    ),
  );
}

/** The header's daemon chips: each ingress, running or stopped, and the poller's last cycle. */
export function daemonChips(daemons) {
  return (daemons || []).map((d) =>
    h(
      'span',
      { class: `chip ${d.running ? 'up' : 'off'}`, title: d.running ? `pid ${d.pid}` : 'not running (or not enabled)' },
      d.daemon,
      ' · ',
      d.running ? (d.lastCycleAt ? `last cycle ${ago(d.lastCycleAt)}` : 'running') : 'not running',
    ),
  );
}
