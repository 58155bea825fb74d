// dom.js — small DOM helpers for the console. Every text from the broker is
// put in with textContent (never innerHTML), so a host or user name cannot
// inject markup; styles are set through the CSSOM, which the page's
// Content-Security-Policy allows (inline style attributes it does not).

/** Makes an element: h('td', {class: 'num'}, 'text', child, …). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/**
 * `text` with every control character (C0, DEL, C1) and every Unicode
 * bidirectional mark, embedding, override and isolate written as an escape
 * (`\x1b`, `\u{202e}`): an audit entry or a name from the directory may
 * hold text someone else chose, and shown raw a bidi override could make a
 * row read as another.
 */
export function inert(text) {
  return String(text ?? '').replace(/[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => {
    const n = c.charCodeAt(0);
    return n <= 0xff ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u{${n.toString(16)}}`;
  });
}

/** Sets an element's text only when it changed (keeps selections stable). */
export function setText(el, text) {
  const t = String(text);
  if (el.textContent !== t) el.textContent = t;
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

/**
 * Brings a table body up to date with `items`, reusing the row of each key
 * so that a row under the pointer (a toggle, a button waiting for its
 * second click) is updated in place rather than replaced by every poll.
 */
export function keyedRows(tbody, items, key, create, update) {
  const old = new Map();
  for (const tr of tbody.children) old.set(tr.dataset.key, tr);
  const rows = items.map((item) => {
    const k = key(item);
    let tr = old.get(k);
    if (!tr) {
      tr = create(item);
      tr.dataset.key = k;
    }
    update(tr, item);
    return tr;
  });
  const same = rows.length === tbody.children.length && rows.every((r, i) => tbody.children[i] === r);
  if (!same) tbody.replaceChildren(...rows);
}

/** An inline sparkline of the last values (SVG, drawn through the DOM). */
export function sparkline(values, width = 120, height = 28, label = '') {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  svg.setAttribute('class', 'spark');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  if (values.length > 1) {
    const max = Math.max(1, ...values);
    const min = Math.min(...values, max);
    const span = Math.max(1, max - min);
    const step = width / (values.length - 1);
    const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - ((v - min) / span) * (height - 4)).toFixed(1)}`);
    const line = document.createElementNS(NS, 'polyline');
    line.setAttribute('points', pts.join(' '));
    svg.append(line);
  }
  return svg;
}

/** "12 s ago", "3 min ago", "2 h ago" for a RFC 3339 time, or "never". */
export function ago(rfc3339, now = Date.now()) {
  if (!rfc3339) return 'never';
  const s = Math.max(0, Math.round((now - Date.parse(rfc3339)) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min ago`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/** 10000 → "10,000". */
export const num = (n) => Number(n).toLocaleString('en-US');

/** Page sizes offered for hosts, sessions and actions (the API's bound is 1000). */
export const PAGE_SIZES = [50, 100, 250, 500, 1000];
export const DEFAULT_PAGE_SIZE = 100;

/** A column heading. */
export const th = (text, cls) => h('th', { scope: 'col', class: cls }, text);

/** A form field with its label; `input` gets the id. */
export function field(label, input, hint) {
  return h('div', { class: 'field' }, h('label', { for: input.id }, label), input, hint ? h('small', { class: 'muted' }, hint) : null);
}

/** An empty line for a view's errors and notices, read out when it changes. */
export function message(id) {
  return h('p', { id, class: 'message', role: 'alert' });
}

/** Shows `text` in a `message` line, as `kind` (`error`, `ok`, or none). */
export function say(el, text, kind) {
  el.className = `message ${kind || ''}`;
  setText(el, text);
}

// ---------------------------------------------------------------- widgets

/** A destructive button waits this long for its confirming second click. */
export const CONFIRM_MS = 5000;

/** A `<select>` of `[value, text]` options with `value` chosen. */
export function select(id, options, value) {
  return h(
    'select',
    { id },
    options.map(([v, text]) => h('option', { value: v, selected: v === value ? true : undefined }, text)),
  );
}

/**
 * What the user typed in a number field, as the API should see it: a
 * number when it is one, else the text itself, so that the API answers
 * with its own message (the console adds no rules of its own).
 */
export function numberOrText(s) {
  const t = s.trim();
  return /^-?\d+$/.test(t) ? Number(t) : t;
}

/** A horizontal bar with its number beside it (readable without colour). */
export function bar(cls) {
  const fill = h('span', { class: 'fill' });
  const text = h('span', { class: 'bar-text' });
  return { el: h('span', { class: `bar ${cls}` }, h('span', { class: 'track', 'aria-hidden': 'true' }, fill), text), fill, text };
}

/** Sets a bar's fill (0 to 1, clamped) and the number beside it. */
export function setBar(cell, fraction, text) {
  const f = Math.max(0, Math.min(1, fraction));
  cell.querySelector('.fill').style.width = `${(f * 100).toFixed(1)}%`;
  setText(cell.querySelector('.bar-text'), text);
}

/** The page and page size a view's URL asks for (`?page=&size=`), with the skip it means. */
export function pageParams(params) {
  const size = PAGE_SIZES.includes(Number(params.get('size'))) ? Number(params.get('size')) : DEFAULT_PAGE_SIZE;
  const page = Math.max(1, parseInt(params.get('page'), 10) || 1);
  return { size, page, skip: (page - 1) * size };
}

/** First/previous/next/last links and a page-size choice, all in the URL's hash. */
export function pager(id, link, size) {
  const text = h('span', { class: 'pager-text' });
  const mk = (label, rel) => h('a', { class: 'button', 'data-rel': rel, role: 'button' }, label);
  const first = mk('« First', 'first');
  const prev = mk('‹ Previous', 'prev');
  const next = mk('Next ›', 'next');
  const last = mk('Last »', 'last');
  const sizes = select(`${id}-size`, PAGE_SIZES.map((s) => [String(s), `${s} per page`]), String(size));
  sizes.addEventListener('change', () => {
    location.hash = link(1, Number(sizes.value));
  });
  const el = h('nav', { id, class: 'pager', 'aria-label': 'pages' }, first, prev, text, next, last, h('label', { class: 'sr-only', for: sizes.id }, 'Page size'), sizes);
  const enable = (a, page) => {
    if (page) {
      a.href = link(page, size);
      a.removeAttribute('aria-disabled');
    } else {
      a.removeAttribute('href');
      a.setAttribute('aria-disabled', 'true');
    }
  };
  /** page: current page; lastPage: null when unknown; hasNext from nextLink. */
  const update = (label, page, lastPage, hasNext) => {
    setText(text, label);
    enable(first, page > 1 ? 1 : null);
    enable(prev, page > 1 ? page - 1 : null);
    enable(next, hasNext ? page + 1 : null);
    enable(last, lastPage && lastPage > page ? lastPage : null);
  };
  return { el, update };
}
