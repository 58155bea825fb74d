// api.js — the console's one door to the broker: the public HTTP API under
// /api/v1, with the admin token as a Bearer header, exactly as a script
// would call it. No other path, no cookie, no private endpoint.
//
// The token lives in this tab's sessionStorage (gone when the tab closes),
// is sent only in the Authorization header, and never in a URL, so it
// appears in no history, referrer or access log.

const TOKEN_KEY = 'deskbroker.adminToken';
/** A request that takes longer than this is given up: the same bound as every
 * other client of the broker (api::REQUEST_TIMEOUT in crates/api). */
export const REQUEST_TIMEOUT_MS = 15000;

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (t) => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/**
 * A failed call, classified as every client of the broker classifies it
 * (crates/api, ClientError): the API's refusal, with its own code and message
 * ({"error": {code, message}}); an answer that is not the API's (a proxy's
 * error page: `code` null); or no answer at all (`status` 0, `code` null).
 */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
  /** The one-line form the CLI prints: "Code: message", or the message alone. */
  toString() {
    return this.code ? `${this.code}: ${this.message}` : this.message;
  }
}

/** Encodes one path segment (pool, host or session names). */
export const seg = encodeURIComponent;

/** Builds "?a=1&b=2" from the entries whose value is not empty. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** Listeners told when the broker refuses the token (401). */
const unauthorized = new Set();
export const onUnauthorized = (f) => unauthorized.add(f);

/**
 * Calls the API: `api('GET', '/hostPools')`. Answers the parsed JSON (null
 * for an empty body); throws ApiError with the API's code and message.
 * `extraHeaders` are sent too, e.g. `{ 'If-None-Match': '*' }`.
 */
export async function api(method, path, body, tokenOverride, extraHeaders = {}) {
  return (await send(method, path, body, tokenOverride, extraHeaders, 'application/json')).json;
}

/**
 * Calls the API for a body that is not JSON (an `.rdp` file): answers its
 * text; a refusal is an ApiError as with `api`.
 */
export async function apiText(method, path) {
  return (await send(method, path, undefined, undefined, {}, '*/*')).text;
}

async function send(method, path, body, tokenOverride, extraHeaders, accept) {
  const t = tokenOverride ?? token.get();
  const headers = { Accept: accept, ...extraHeaders };
  if (t) headers.Authorization = `Bearer ${t}`;
  const init = {
    method,
    headers,
    cache: 'no-store',
    credentials: 'omit',
    referrerPolicy: 'no-referrer',
    redirect: 'error',
  };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), REQUEST_TIMEOUT_MS);
  init.signal = abort.signal;
  let resp;
  let text;
  try {
    resp = await fetch(`/api/v1${path}`, init);
    text = await resp.text();
  } catch (e) {
    const why = e.name === 'AbortError' ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : e.message;
    throw new ApiError(0, null, `the broker did not answer (${why})`);
  } finally {
    clearTimeout(timer);
  }
  let json = null;
  if (text && (accept === 'application/json' || !resp.ok)) {
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
  }
  if (!resp.ok) {
    const err = json && json.error;
    let e;
    if (err && typeof err.code === 'string') {
      e = new ApiError(resp.status, err.code, String(err.message ?? ''));
    } else {
      const excerpt = text.trim().replace(/\s+/g, ' ').slice(0, 200);
      e = new ApiError(
        resp.status,
        null,
        `HTTP ${resp.status} ${resp.statusText} from the broker, which is not an answer of the deskbroker API` +
          (excerpt ? `: ${excerpt}` : ''),
      );
    }
    if (resp.status === 401 && tokenOverride === undefined) unauthorized.forEach((f) => f(e));
    throw e;
  }
  return { json, text };
}
