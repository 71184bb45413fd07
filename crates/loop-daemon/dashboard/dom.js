// Building the page from data without ever parsing data as HTML: every string given to
// `h` becomes a text node (comments, titles and questions come from GitHub and agents),
// and a link goes only to http(s).

/** An element `tag` with `props` (attributes, `class`, `on<event>` handlers) and children. */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props == null || typeof props !== 'object' || props instanceof Node || Array.isArray(props)) {
    children.unshift(props);
    props = {};
  }
  for (const [key, value] of Object.entries(props)) {
    if (value == null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'href') el.setAttribute('href', safeHref(value));
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces everything in `el` with `children`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** `url` when it is http(s) or a page-relative link, else a harmless `#`. */
export function safeHref(url) {
  if (typeof url === 'string' && url.startsWith('#')) return url;
  try {
    const parsed = new URL(url, location.href);
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.href : '#';
  } catch {
    return '#';
  }
}

/** How long ago `ts` (RFC 3339) was, in words: `12s ago`, `5m ago`, `3h ago`, `2d ago`. */
export function ago(ts) {
  const at = Date.parse(ts);
  if (Number.isNaN(at)) return '';
  const seconds = Math.max(0, Math.round((Date.now() - at) / 1000));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ago`;
  return `${Math.floor(seconds / 86400)}d ago`;
}

/** A `<time>` of `ts`, shown as its age, the exact time on hover. */
export function when(ts) {
  return ts ? h('time', { datetime: ts, title: ts }, ago(ts)) : h('span', { class: 'muted' }, '—');
}

/** `github:owner/repo#N` → `owner/repo#N`. */
export function shortRef(ref) {
  return String(ref).replace(/^github:/, '');
}

/** The page of work item `ref`. */
export function itemHref(ref) {
  return `#/item/${encodeURIComponent(ref)}`;
}
