// The control plane's JSON API as this page calls it: same origin (so the service's
// Origin check lets its actions through), JSON in and out, and the bearer token when
// the service asks for one (kept for this tab only, in sessionStorage).

const TOKEN_KEY = 'the-loop:token';

/** A refusal: the HTTP status (0: no answer at all) and the service's `detail`. */
export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

async function call(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (token()) headers.Authorization = `Bearer ${token()}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'the service does not answer: is `the-loop start` running?');
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const detail = data && typeof data.detail === 'string' ? data.detail : `HTTP ${response.status}`;
    throw new ApiError(response.status, detail);
  }
  return data;
}

/** `path?query` (a list value repeats its key); empty values are left out. */
export function url(path, query = {}) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    for (const one of [value].flat()) if (one != null && one !== '') params.append(key, String(one));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

export const get = (path, query) => call('GET', url(path, query));
export const post = (path, body) => call('POST', path, body);

/** `get`, but a 404 is `null` (the thing does not exist yet), not an error. */
export async function find(path, query) {
  try {
    return await get(path, query);
  } catch (err) {
    if (err.status === 404) return null;
    throw err;
  }
}
