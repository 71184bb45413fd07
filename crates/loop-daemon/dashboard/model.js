// What the board shows, derived from the API's answers (the join of reference §2.2): a
// work item is on the board when it has a portable record (`/work-items`) or a session
// on this machine (`/sessions`); its state is the first that holds of
//   ended          — the record says it closed or merged, and no session is live;
//   awaiting input — a live session of it holds an open question (`/attention`);
//   paused         — its session is paused;
//   running        — its session (or a pull request's) is active;
//   ended          — its session is closed (stopped, or the item closed);
//   armed          — its last command is `start` or `resume`, with no session yet;
//   watched        — seen by the-loop, never started.
// "Needs you" is the service's `/attention` rows and the work items parked at a human
// gate (their graph's check, `/graph/check`, says its current node is `waiting`):
// questions first, then gates, errors last.

export const STATES = [
  { id: 'armed', label: 'Armed', hint: 'started, no session yet' },
  { id: 'running', label: 'Running', hint: 'an agent session works on it' },
  { id: 'paused', label: 'Paused', hint: 'its session waits for a resume' },
  { id: 'awaiting', label: 'Awaiting input', hint: 'the agent asked a question' },
  { id: 'ended', label: 'Ended', hint: 'closed, or its session stopped' },
  { id: 'watched', label: 'Watched', hint: 'seen, never started' },
];

const ARMING = new Set(['start', 'resume']);

/**
 * One row per work item: `{ref, url, title, record, session, state, question, usage, activity}`,
 * newest first (the title is the poller's, from GitHub: text to show, never markup).
 */
export function board({ records, sessions, attention, graphs }) {
  const rows = new Map();
  const row = (ref) => {
    if (!rows.has(ref)) rows.set(ref, { ref, url: null, record: null, session: null });
    return rows.get(ref);
  };
  for (const record of records || []) {
    if (typeof record.ref !== 'string') continue;
    const r = row(record.ref);
    r.record = record;
    r.url = record.url || r.url;
  }
  for (const session of sessions || []) {
    if (typeof session.ref !== 'string') continue;
    const r = row(session.ref);
    r.session = session;
    r.url = r.url || session.url;
  }
  const questions = new Map();
  for (const entry of attention || []) {
    if (entry.kind === 'awaiting-input') questions.set(entry.workItem, entry.detail);
  }
  for (const r of rows.values()) {
    r.title = typeof r.record?.poll?.title === 'string' ? r.record.poll.title : '';
    r.question = questionOf(r, questions);
    // Why the graph cannot run in its session's checkout (the listing's `graphWarning`).
    r.graphWarning = typeof r.record?.graphWarning === 'string' ? r.record.graphWarning : '';
    r.graph = graphs?.get(r.ref) || null;
    r.gate = gateOf(r.graph);
    r.position = positionOf(r);
    r.feedback = Array.isArray(r.record?.graph?.feedback) ? r.record.graph.feedback : [];
    r.state = stateOf(r);
    // What its sessions spent: the listing's sum over them, else the own session's.
    r.usage = r.record?.usage || r.session?.usage || null;
    r.activity = r.session?.lastEventAt || r.record?.poll?.lastPolledAt || r.session?.createdAt || '';
  }
  return [...rows.values()].sort(
    (a, b) => (b.activity || '').localeCompare(a.activity || '') || a.ref.localeCompare(b.ref),
  );
}

/** The open question of `r`'s sessions (its own or a pull request's), if any. */
function questionOf(r, questions) {
  const served = [r.ref, ...(r.session?.pullRequests || []).map((pr) => pr.ref)];
  for (const ref of served) if (questions.has(ref)) return questions.get(ref);
  return null;
}

/**
 * Where `r` is in its process graph: `{node, phase, loop}` from the listing's `graph`
 * section (derived from the state file in its session's checkout), else its graph
 * check's current node; null for an item with no graph driven here.
 */
function positionOf(r) {
  const section = r.record?.graph;
  const node = (typeof section?.currentNode === 'string' && section.currentNode) || r.graph?.currentNode || '';
  if (!node) return null;
  const phase = typeof section?.phase === 'string' ? section.phase : null;
  const loop = typeof section?.loop === 'string' ? section.loop : '';
  return { node, phase, loop };
}

/** The statuses of `session`'s endpoints: its own, then each pull request's. */
export function statuses(session) {
  if (!session) return [];
  return [session.status, ...(session.pullRequests || []).map((pr) => pr.status)].filter(Boolean);
}

function stateOf(r) {
  const all = statuses(r.session);
  const live = all.some((s) => s === 'active' || s === 'paused');
  if (r.record?.ended && !live) return 'ended';
  if (r.question) return 'awaiting';
  if (r.session?.status === 'paused') return 'paused';
  if (all.includes('active')) return 'running';
  if (all.includes('closed')) return 'ended';
  if (ARMING.has(r.record?.control?.command)) return 'armed';
  return 'watched';
}

/**
 * The human gate a graph check (`/graph/check`'s answer) says the item waits at:
 * `{node, reason}`, or null when its current node is not a human's waiting decision.
 */
export function gateOf(check) {
  const at = (check?.nodes || []).find((n) => n.node === check.currentNode);
  if (!at || at.status !== 'waiting') return null;
  const reason = check.parked?.node === at.node ? check.parked.reason : (at.messages || []).join('; ');
  return { node: at.node, reason: String(reason || '') };
}

/** How "Needs you" orders its kinds: a question first, errors last. */
const RANK = ['awaiting-input', 'agent-waiting', 'human-gate', 'session-paused', 'armed-without-session', 'recent-error'];

const KIND_LABEL = {
  'human-gate': 'human gate',
  'session-paused': 'paused',
  'armed-without-session': 'no session',
  'awaiting-input': 'needs input',
  'agent-waiting': 'agent waits',
  'recent-error': 'error',
};

/**
 * The "Needs you" entries `{workItem, kind, label, detail}` of the board's answers (the
 * service's rows, and a `human-gate` row per item parked at one), in `RANK` order.
 */
export function needsYou({ attention, graphs }) {
  const rank = (kind) => (RANK.includes(kind) ? RANK.indexOf(kind) : RANK.length);
  const gates = [];
  for (const [ref, check] of graphs || []) {
    const gate = gateOf(check);
    if (!gate) continue;
    const detail = `\`${gate.node}\` waits for a human decision${gate.reason ? `: ${gate.reason}` : ''}`;
    gates.push({ workItem: ref, kind: 'human-gate', detail });
  }
  return [...(attention || []), ...gates]
    .map((entry) => ({
      workItem: typeof entry.workItem === 'string' ? entry.workItem : '',
      kind: String(entry.kind || ''),
      label: KIND_LABEL[entry.kind] || String(entry.kind || '').replaceAll('-', ' '),
      detail: String(entry.detail ?? ''),
    }))
    .sort((a, b) => rank(a.kind) - rank(b.kind));
}

/**
 * A work item's usage in a few words: `$0.0421 · 95.2k tokens`, or `cost unknown · …` when
 * a model it used has no price (the API's `costUsd: null`); `''` without usage.
 */
export function usageText(usage) {
  if (!usage) return '';
  const tokens = ['inputTokens', 'outputTokens', 'cacheWriteTokens', 'cacheReadTokens']
    .map((key) => Number(usage[key]) || 0)
    .reduce((a, b) => a + b, 0);
  const count = tokens >= 1e6 ? `${(tokens / 1e6).toFixed(1)}M` : tokens >= 1e3 ? `${(tokens / 1e3).toFixed(1)}k` : `${tokens}`;
  const cost = typeof usage.costUsd === 'number' ? `$${usage.costUsd.toFixed(4)}` : 'cost unknown';
  return `${cost} · ${count} tokens`;
}
