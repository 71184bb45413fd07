// A work item's page (`#/item/<ref>`): where it stands, its sessions with the commands
// that attach to them, the operator's levers (pause, resume, stop, start, cleanup, a
// reply to the agent, approve or deny its open permission prompt, and at a human gate
// "Approve — advance graph") each behind a
// confirmation, its explain trail (what the-loop did
// with each delivery, in plain words) and its recent event-log lines. The reply box is
// built once per visit, so a live refresh never loses what is being typed.

import { find, get, post } from './api.js';
import { fill, h, shortRef, when } from './dom.js';
import { STATES, board, statuses } from './model.js';

/** The verbs offered for a session in each status (none: no session, or closed). */
const VERBS = {
  active: ['pause', 'stop'],
  paused: ['resume', 'stop'],
  none: ['start', 'cleanup'],
};

const VERB_TEXT = {
  pause: 'The session stops receiving events until it is resumed.',
  resume: 'The paused session receives events again.',
  stop: 'The agent session is ended; a later start begins a new one.',
  start: 'A session is spawned for it (or the existing one receives events again).',
  cleanup: 'Its ended session’s tmux session and workspace are removed.',
  approve: 'The agent’s open permission prompt is allowed: the tool it asked for runs.',
  deny: 'The agent’s open permission prompt is refused: the agent is told, the tool never runs.',
};

/**
 * Draws work item `ref`'s page in `view` with `data` (the board's answers), fetching its
 * trail and events; `ui` has `confirm(title, text)` and `refresh()`.
 */
export async function renderItem(view, ref, data, ui) {
  let page = view.querySelector(':scope > article.item');
  if (!page || page.dataset.ref !== ref) page = skeleton(view, ref, ui);
  const row = board(data).find((r) => r.ref === ref) || null;
  const [explained, events] = await Promise.all([
    find('/api/v1/explain', { subject: ref, limit: 20 }),
    get('/api/v1/events', { workItem: ref, limit: 100 }),
  ]);
  const part = (name) => page.querySelector(`[data-part="${name}"]`);
  fill(part('state'), stateBadge(row));
  fill(part('title'), row?.title || '');
  const github = row?.url;
  fill(part('links'), github && h('a', { href: github, rel: 'noreferrer', target: '_blank' }, 'open on GitHub ↗'));
  fill(part('summary'), summary(row, explained));
  fill(part('actions'), actions(ref, row, ui));
  fill(part('gate'), gateCard(ref, row, ui, part('gate-notice')));
  part('gate-panel').hidden = !row?.gate && !part('gate-notice').textContent;
  const replyOpen = row?.session && row.state !== 'ended';
  part('reply').hidden = !replyOpen;
  fill(part('sessions'), sessions(row));
  fill(part('trail'), trail(explained));
  fill(part('events'), eventTable(events));
}

function skeleton(view, ref, ui) {
  const text = h('textarea', { name: 'reply', rows: 3, placeholder: 'Say something to the agent…', required: true });
  const notice = h('p', { class: 'notice', 'data-part': 'reply-notice', role: 'status' });
  const send = async (event) => {
    event.preventDefault();
    const said = text.value.trim();
    if (!said) return;
    const ok = await ui.confirm(
      `Reply to ${shortRef(ref)}?`,
      'Your text is pasted into its agent session, marked as the operator’s, and mirrored on the work item.',
    );
    if (!ok) return;
    try {
      const answer = await post('/api/v1/sessions/reply', { ref, text: said });
      text.value = '';
      fill(notice, answer.delivered ? 'Delivered to the session.' : 'Not delivered.');
      if (answer.mirrorError) notice.append(` (not mirrored on GitHub: ${answer.mirrorError})`);
    } catch (err) {
      fill(notice, h('span', { class: 'error' }, `Refused: ${err.message}`));
    }
    ui.refresh();
  };
  const page = h(
    'article',
    { class: 'item', 'data-ref': ref },
    h('p', h('a', { href: '#/' }, '← board')),
    h('header', h('h1', shortRef(ref)), h('span', { 'data-part': 'state' }), h('span', { 'data-part': 'links' })),
    h('p', { class: 'title', 'data-part': 'title' }),
    h('section', { 'data-part': 'summary', class: 'summary' }),
    h('section', { 'data-part': 'actions', class: 'actions', 'aria-label': 'Actions' }),
    h(
      'section',
      { 'data-part': 'gate-panel', class: 'gate card-like', 'aria-label': 'Human gate', hidden: true },
      h('div', { 'data-part': 'gate' }),
      h('p', { class: 'notice', 'data-part': 'gate-notice', role: 'status' }),
    ),
    h(
      'form',
      { 'data-part': 'reply', class: 'reply', onsubmit: send, hidden: true },
      h('label', 'Reply to the agent', text),
      h('button', { type: 'submit', class: 'primary' }, 'Send reply…'),
      notice,
    ),
    h('section', { class: 'panel' }, h('h2', 'Sessions'), h('div', { 'data-part': 'sessions' })),
    h('section', { class: 'panel' }, h('h2', 'What happened'), h('div', { 'data-part': 'trail' })),
    h('section', { class: 'panel' }, h('h2', 'Event log'), h('div', { 'data-part': 'events' })),
  );
  fill(view, page);
  return page;
}

function stateBadge(row) {
  if (!row) return h('span', { class: 'badge' }, 'unknown here');
  const state = STATES.find((s) => s.id === row.state);
  return h('span', { class: `badge state-${row.state}`, title: state?.hint }, state?.label || row.state);
}

function summary(row, explained) {
  const control = row?.record?.control;
  return [
    row?.question && h('div', { class: 'question card-like' }, h('strong', 'The agent asks: '), row.question),
    row?.graphWarning && h('p', { class: 'graph-warning', role: 'alert' }, row.graphWarning),
    control &&
      h(
        'p',
        'Last command ',
        h('code', control.command),
        control.actor && [' by ', h('strong', control.actor)],
        control.source && ` (${control.source})`,
        ' ',
        when(control.requestedAt),
      ),
    row?.position &&
      h(
        'p',
        { class: 'position' },
        'Process graph: at ',
        h('code', row.position.node),
        row.position.phase && [' (label ', h('code', `loop:${row.position.phase}`), ')'],
        row.position.loop && ` in ${row.position.loop}`,
      ),
    row?.feedback?.length > 0 &&
      h(
        'section',
        { class: 'feedback', 'aria-label': 'Reviewer feedback' },
        h('h2', 'Reviewer feedback'),
        h(
          'ul',
          { class: 'plain' },
          row.feedback.map((f) =>
            h('li', h('strong', f.by), ` at \`${f.node}\` on `, h('code', f.into), ` (${f.outcome}) `, when(f.at), h('blockquote', f.text)),
          ),
        ),
      ),
    row?.record?.ended &&
      h('p', `Ended: ${row.record.ended.state} ${row.record.ended.kind}`, ' ', when(row.record.ended.at)),
    explained && h('ul', { class: 'plain' }, (explained.summary || []).map((line) => h('li', line))),
    !row && !explained && h('p', { class: 'muted' }, 'Nothing is known about this work item on this machine.'),
  ];
}

function actions(ref, row, ui) {
  const status = row?.session?.status;
  const asking = row?.session?.agentState === 'needs-permission';
  const verbs = [
    ...(asking ? ['approve', 'deny'] : []),
    ...VERBS[status === 'active' || status === 'paused' ? status : 'none'],
  ];
  const notice = h('p', { class: 'notice', role: 'status' });
  const act = async (verb) => {
    const ok = await ui.confirm(
      `${verb[0].toUpperCase()}${verb.slice(1)} ${shortRef(ref)}?`,
      asking && (verb === 'approve' || verb === 'deny')
        ? `${VERB_TEXT[verb]} The answer is posted on the work item, as a \`the-loop ${verb}\` comment would be.`
        : `${VERB_TEXT[verb]} The command is posted on the work item, as \`the-loop sessions ${verb}\` does.`,
    );
    if (!ok) return;
    try {
      const answer = await post('/api/v1/sessions/control', { ref, verb });
      fill(notice, h('span', { class: answer.exitCode === 0 ? '' : 'error' }, answer.output || answer.effect));
    } catch (err) {
      fill(notice, h('span', { class: 'error' }, `Refused: ${err.message}`));
    }
    ui.refresh();
  };
  return [
    h(
      'div',
      { class: 'buttons' },
      verbs.map((verb) =>
        h('button', { type: 'button', 'data-verb': verb, onclick: () => act(verb) }, `${verb[0].toUpperCase()}${verb.slice(1)}…`),
      ),
    ),
    notice,
  ];
}

/**
 * The human gate `row` waits at: the node and why, "Approve — advance graph" (its gate
 * asked again, as `the-loop graph complete` asks it) and the ticket, where a review gate
 * reads its decision. What the approval came to goes in `notice`.
 */
function gateCard(ref, row, ui, notice) {
  const gate = row?.gate;
  if (!gate) return null;
  const approve = async () => {
    const ok = await ui.confirm(
      `Approve ${shortRef(ref)} at ${gate.node}?`,
      `The gate of \`${gate.node}\` is asked again now, as \`the-loop graph complete\` asks it. A gate that reads its decision from the work item (an approval comment, the \`the-loop execute\` reply) waits until that comment is there.`,
    );
    if (!ok) return;
    try {
      const answer = await post('/api/v1/graph/complete', {
        repo: row.session.cwd,
        workItem: row.graph.workItem,
        ref,
        node: gate.node,
      });
      const said = (answer.messages || []).join('; ');
      fill(
        notice,
        answer.moved
          ? `Advanced: now at ${answer.currentNode}.`
          : `Still waiting at ${answer.node}${said ? `: ${said}` : ''}${answer.reason ? ` (${answer.reason})` : ''}.`,
      );
    } catch (err) {
      fill(notice, h('span', { class: 'error' }, `Refused: ${err.message}`));
    }
    ui.refresh();
  };
  return [
    h('p', h('strong', 'Human gate: '), h('code', gate.node), ' waits for a decision', gate.reason && ` — ${gate.reason}`),
    h(
      'div',
      { class: 'buttons' },
      h('button', { type: 'button', class: 'primary', 'data-action': 'approve', onclick: approve }, 'Approve — advance graph…'),
      row.url && h('a', { href: row.url, rel: 'noreferrer', target: '_blank' }, 'Request changes on the ticket ↗'),
    ),
  ];
}

function sessions(row) {
  const session = row?.session;
  if (!session) return h('p', { class: 'muted' }, 'No session on this machine.');
  const endpoints = [session, ...(session.pullRequests || [])];
  return h(
    'ul',
    { class: 'sessions' },
    endpoints.map((e) =>
      h(
        'li',
        h('strong', shortRef(e.ref)),
        ' ',
        h('span', { class: `badge status-${e.status}` }, e.status || '—'),
        ' ',
        e.harness,
        ' · started ',
        when(e.createdAt),
        e.lastEventAt && [' · last event ', when(e.lastEventAt)],
        e.agentState && [' · agent ', h('span', { class: `agent agent-${e.agentState}` }, e.agentState), ' since ', when(e.agentStateSince)],
        e.permission && h('p', { class: 'permission' }, 'asks to run ', h('code', `${e.permission.tool} ${e.permission.input}`), ' — answer with Approve… or Deny… above, or on the item with `the-loop approve` or `the-loop deny <reason>`'),
        e.limit && h('p', { class: 'limit' }, e.limit.until ? `cut off by a usage limit until ${e.limit.until}` : e.limit.notice),
        e.attach && h('pre', { class: 'attach', title: 'attach a terminal to it (detach: Ctrl-b d)' }, e.attach),
      ),
    ),
    statuses(session).length === 0 && h('li', { class: 'muted' }, 'its session has no endpoint'),
  );
}

function trail(explained) {
  const deliveries = explained?.deliveries || [];
  if (deliveries.length === 0) return h('p', { class: 'muted' }, 'Nothing in the event log about it yet.');
  return h(
    'ol',
    { class: 'trail', reversed: true },
    [...deliveries].reverse().map((d) =>
      h(
        'li',
        { class: `delivery outcome-${d.verdict?.outcome || 'none'}`, 'data-delivery': d.delivery || '' },
        d.verdict && h('p', { class: 'verdict' }, h('span', { class: 'badge' }, d.verdict.outcome), ' ', d.verdict.text),
        h(
          'ul',
          { class: 'steps' },
          (d.steps || []).map((s) => h('li', { class: `mark-${s.mark}` }, when(s.ts), ' ', s.text, ' ', h('code', s.event))),
        ),
        d.delivery && h('p', { class: 'muted small' }, 'delivery ', h('code', d.delivery)),
      ),
    ),
  );
}

/** The fields of an event-log line worth a glance (not its envelope). */
const ENVELOPE = new Set(['ts', 'level', 'source', 'event', 'work_item', 'pid', 'host']);

function eventTable(events) {
  if (!events || events.length === 0) return h('p', { class: 'muted' }, 'No event-log lines.');
  return h(
    'div',
    { class: 'scroll' },
    h(
      'table',
      { class: 'events' },
      h('thead', h('tr', h('th', 'when'), h('th', 'level'), h('th', 'event'), h('th', 'detail'))),
      h(
        'tbody',
        [...events].reverse().map((e) =>
          h(
            'tr',
            { class: `level-${e.level}` },
            h('td', when(e.ts)),
            h('td', e.level),
            h('td', h('code', e.event)),
            h(
              'td',
              Object.entries(e)
                .filter(([key]) => !ENVELOPE.has(key))
                .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
                .join('  '),
            ),
          ),
        ),
      ),
    ),
  );
}
