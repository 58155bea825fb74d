// app.js — the deskbroker web console: sign-in, host pools, a pool's session
// hosts (with power start/stop), sessions (with messages to their users);
// a pool's scaling actions and the audit log are in records.js, a user's
// directory groups in users.js, published applications and application
// groups in workspace.js. Plain ES
// modules, no build step, no third-party code.
//
// Every number on screen comes from the public API (api.js). The pages
// follow changes by short polling: one refresh of the page in view every
// POLL_INTERVAL_MS, never two at once, none while the tab is hidden. The
// long lists are paged by the API itself (pageSize/initialSkip), so a pool
// of 10,000 hosts costs one page per refresh, not the whole pool.

import { api, ApiError, onUnauthorized, query, seg, token } from './api.js';
import { CONFIRM_MS, DEFAULT_PAGE_SIZE, ago, bar, field, h, keyedRows, message, num, numberOrText, pageParams, pager, replace, say, select, setBar, setText, sparkline, th } from './dom.js';
import { auditView, scalingView } from './records.js';
import { dayOneTools } from './dayone.js';
import { usersView } from './users.js';
import { applicationsView, groupsView, publishingFields } from './workspace.js';

/** How often the page in view is refreshed. */
const POLL_INTERVAL_MS = 2000;
/** Session counts kept per pool for rates and sparklines (3 min at 2 s). */
const HISTORY_POINTS = 90;
/** maxSessionLimit's default and highest value: no limit in practice (P4). */
const UNLIMITED = 999999;
const POOL_TYPES = ['Pooled', 'Personal'];
const ALGORITHMS = ['BreadthFirst', 'DepthFirst', 'LoadIndex', 'Persistent', 'MultiplePersistent'];

const main = document.getElementById('main');
const live = document.getElementById('live');
const nav = document.getElementById('nav');
const signout = document.getElementById('signout');

/**
 * Who is signed in (GET /api/v1/whoami: role, name, pools), so that the
 * console shows only what the role may do; the broker decides anyway
 * (rule T1), this only spares people buttons that would be refused.
 */
let me = null;
const may = {
  /** Create, change and delete pools (admin). */
  edit: () => me !== null && me.role === 'admin',
  /** Drain, undrain, log off, start and stop hosts, message users (admin, operator). */
  operate: () => me !== null && (me.role === 'admin' || me.role === 'operator'),
  /** Hosts, sessions, the audit log, users' groups (all but portal). */
  read: () => me !== null && me.role !== 'portal',
};

// ---------------------------------------------------------------- history

/** pool name → [{t, n}]: its session count at each refresh, bounded. */
const history = new Map();

function sample(pool, n, t) {
  let s = history.get(pool);
  if (!s) history.set(pool, (s = []));
  const last = s[s.length - 1];
  if (last && t - last.t < 500) return; // two views refreshed at once
  s.push({ t, n });
  if (s.length > HISTORY_POINTS) s.splice(0, s.length - HISTORY_POINTS);
}

/** Change of a pool's session count per second over the last few refreshes. */
function rate(pool) {
  const s = history.get(pool);
  if (!s || s.length < 2) return null;
  const last = s[s.length - 1];
  const ref = s[Math.max(0, s.length - 4)];
  const dt = (last.t - ref.t) / 1000;
  return dt > 0 ? (last.n - ref.n) / dt : null;
}

function rateText(r) {
  if (r === null) return '…';
  const v = Math.abs(r) < 0.05 ? 0 : r;
  return `${v > 0 ? '+' : v < 0 ? '−' : ''}${Math.abs(v).toFixed(1)}/s`;
}

const counts = (pool) => (history.get(pool) || []).map((x) => x.n);

// ---------------------------------------------------------------- polling

let current = null;
let timer = null;
let busy = false;
let again = false;

function setLive(state, detail) {
  live.className = `live ${state}`;
  if (state === 'ok') {
    setText(live, `● Live — updated ${new Date().toLocaleTimeString('en-GB')} in ${Math.round(detail)} ms`);
    live.dataset.refreshMs = String(Math.round(detail));
  }
  else if (state === 'paused') setText(live, '❚❚ Paused while this tab is hidden');
  else if (state === 'error') setText(live, `⚠ Not updated: ${detail} (retrying)`);
  else setText(live, '');
}

function schedule() {
  if (timer === null && current && !document.hidden) timer = setTimeout(tick, POLL_INTERVAL_MS);
}

/** Refreshes the page in view now (or right after the refresh under way). */
function kick() {
  clearTimeout(timer);
  timer = null;
  if (busy) again = true;
  else tick();
}

async function tick() {
  timer = null;
  if (!current) return;
  if (document.hidden) {
    setLive('paused');
    return;
  }
  busy = true;
  const view = current;
  const started = performance.now();
  try {
    await view.refresh();
    if (view === current) {
      if (document.hidden) setLive('paused');
      else setLive('ok', performance.now() - started);
    }
  } catch (e) {
    if (view === current && e.status !== 401) {
      setLive('error', e instanceof ApiError ? e.toString() : e.message);
      if (view.failed) view.failed(e);
    }
  } finally {
    busy = false;
    if (again) {
      again = false;
      tick();
    } else {
      schedule();
    }
  }
}

document.addEventListener('visibilitychange', () => {
  if (document.hidden) {
    clearTimeout(timer);
    timer = null;
    setLive('paused');
  } else {
    kick();
  }
});

function show(view, section) {
  if (current) current.closed = true;
  current = view;
  nav.hidden = false;
  signout.hidden = false;
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.nav === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  replace(main, view.el);
  kick();
}

// ---------------------------------------------------------------- routing

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/pools';
  const i = raw.indexOf('?');
  const path = i < 0 ? raw : raw.slice(0, i);
  const params = new URLSearchParams(i < 0 ? '' : raw.slice(i + 1));
  const parts = path
    .split('/')
    .filter(Boolean)
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    });
  return { parts, params };
}

function route() {
  if (!token.get()) {
    signIn();
    return;
  }
  if (me === null) {
    // A reload keeps the token (this tab only), not who it is: ask.
    api('GET', '/whoami')
      .then((who) => {
        me = who;
        route();
      })
      .catch((e) => {
        if (e.status !== 401) signIn(e.toString());
      });
    return;
  }
  for (const a of nav.querySelectorAll('a[data-nav]:not([data-nav="pools"])')) a.hidden = !may.read();
  setText(document.getElementById('whoami'), `${me.name} (${me.role})`);
  const { parts, params } = parseHash();
  if (parts[0] === 'pools' && parts.length === 1) show(poolsView(), 'pools');
  else if (parts[0] === 'pools' && parts.length === 2 && may.read()) show(poolView(parts[1], params), 'pools');
  else if (parts[0] === 'pools' && parts.length === 3 && parts[2] === 'scaling' && may.read()) show(scalingView(parts[1], params), 'pools');
  else if (parts[0] === 'sessions' && may.read()) show(sessionsView(params), 'sessions');
  else if (parts[0] === 'audit' && may.read()) show(auditView(params), 'audit');
  else if (parts[0] === 'users' && may.read()) show(usersView(params), 'users');
  else if (parts[0] === 'applications' && may.read()) show(applicationsView(params, { edit: may.edit(), changed: kick }), 'applications');
  else if (parts[0] === 'appgroups' && may.read()) show(groupsView(params, { edit: may.edit(), changed: kick }), 'appgroups');
  else location.hash = '#/pools';
}

window.addEventListener('hashchange', route);

signout.addEventListener('click', () => {
  token.clear();
  me = null;
  signIn('Signed out.');
});

onUnauthorized((e) => {
  token.clear();
  me = null;
  signIn(`The broker refused the token: ${e.toString()}`);
});

// ---------------------------------------------------------------- helpers

const limitText = (limit) => (limit >= UNLIMITED ? `${num(limit)} (no limit)` : num(limit));


const STATUS_MARK = { Available: '● Available', Unavailable: '✕ Unavailable', Shutdown: '■ Shutdown' };
// How the broker learns about a host (its heartbeats' `heartbeatSource`),
// in the words an operator knows: the agent on the host, or the exporter
// the watching agent scrapes.
const SOURCE_TEXT = { agent: 'agent', windowsExporter: 'windows_exporter' };

// ---------------------------------------------------------------- sign in

function signIn(note) {
  if (current) current.closed = true;
  current = null;
  clearTimeout(timer);
  timer = null;
  setLive('');
  nav.hidden = true;
  signout.hidden = true;
  setText(document.getElementById('whoami'), '');
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true });
  const err = message('signin-error');
  if (note) say(err, note, 'info');
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    { id: 'signin', class: 'card signin', method: 'post', novalidate: true },
    h('h1', {}, 'Sign in'),
    h(
      'p',
      {},
      'Paste the broker’s admin token (DATA_DIR/admin.token, or DESKBROKER_ADMIN_TOKEN), ',
      'or a credential’s token (deskbroker credential create): the console shows what its role may do. ',
      'It stays in this browser tab only and is sent only in the Authorization header.',
    ),
    field('Token', input),
    button,
    err,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const t = input.value.trim();
    if (!t) {
      say(err, 'Paste a token first.', 'error');
      return;
    }
    button.disabled = true;
    say(err, 'Checking…', 'info');
    try {
      const who = await api('GET', '/whoami', undefined, t);
      token.set(t);
      me = who;
      input.value = '';
      route();
    } catch (ex) {
      say(err, ex.toString(), 'error');
    } finally {
      button.disabled = false;
    }
  });
  replace(main, form);
  input.focus();
}

// ---------------------------------------------------------------- pools

function poolsView() {
  const v = { closed: false };
  const tbody = h('tbody');
  const empty = h('p', { class: 'muted', hidden: true }, 'No host pools yet: create one below.');
  const table = h(
    'table',
    { id: 'pools-table', class: 'grid' },
    h(
      'thead',
      {},
      h('tr', {}, th('Name'), th('Type'), th('Algorithm'), th('Limit', 'num'), th('Hosts', 'num'), th('Sessions', 'num'), th('Change', 'num'), th('Sessions, last 3 min')),
    ),
    tbody,
  );
  v.el = h('section', { class: 'view' }, h('h1', {}, 'Host pools'), h('div', { class: 'scroll' }, table), empty, may.edit() ? createPoolForm() : null);
  v.refresh = async () => {
    const r = await api('GET', '/hostPools');
    if (v.closed) return;
    const now = Date.now();
    for (const p of r.value) sample(p.name, p.sessionCount, now);
    empty.hidden = r.value.length > 0;
    keyedRows(
      tbody,
      r.value,
      (p) => p.name,
      (p) =>
        h(
          'tr',
          { dataset: { pool: p.name } },
          h('th', { scope: 'row' }, may.read() ? h('a', { href: `#/pools/${seg(p.name)}` }, p.name) : p.name),
          h('td', { class: 'type' }),
          h('td', { class: 'lb' }),
          h('td', { class: 'limit num' }),
          h('td', { class: 'hosts num' }),
          h('td', { class: 'sessions num' }),
          h('td', { class: 'rate num' }),
          h('td', { class: 'trend' }),
        ),
      (tr, p) => {
        setText(tr.querySelector('.type'), p.hostPoolType);
        setText(tr.querySelector('.lb'), p.loadBalancerType);
        setText(tr.querySelector('.limit'), limitText(p.maxSessionLimit));
        setText(tr.querySelector('.hosts'), num(p.sessionHostCount));
        setText(tr.querySelector('.sessions'), num(p.sessionCount));
        setText(tr.querySelector('.rate'), rateText(rate(p.name)));
        replace(tr.querySelector('.trend'), sparkline(counts(p.name), 120, 24, `session count of ${p.name} over the last minutes`));
      },
    );
  };
  return v;
}

function createPoolForm() {
  const name = h('input', { id: 'new-pool-name', type: 'text', autocomplete: 'off', spellcheck: 'false' });
  const type = select('new-pool-type', POOL_TYPES.map((t) => [t, t]), 'Pooled');
  const lb = select('new-pool-lb', ALGORITHMS.map((t) => [t, t]), 'BreadthFirst');
  const limit = h('input', { id: 'new-pool-limit', type: 'text', inputmode: 'numeric', placeholder: '999999', autocomplete: 'off' });
  const assign = select('new-pool-assignment', [['', '(default)'], ['Automatic', 'Automatic'], ['Direct', 'Direct']], '');
  const apps = publishingFields('new-pool');
  const out = message('new-pool-message');
  const button = h('button', { type: 'submit' }, 'Create host pool');
  const form = h(
    'form',
    { id: 'new-pool', class: 'card', method: 'post', novalidate: true },
    h('h2', {}, 'Create a host pool'),
    h(
      'div',
      { class: 'fields' },
      field('Name', name),
      field('Type', type),
      field('Load balancer (algorithm)', lb, 'Pooled: BreadthFirst, DepthFirst, LoadIndex. Personal: Persistent, MultiplePersistent.'),
      field('Max session limit', limit, '0..999999; empty for the default'),
      field('Personal assignment', assign, 'Personal pools only'),
      apps.fields,
    ),
    button,
    out,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const n = name.value.trim();
    const body = { hostPoolType: type.value, loadBalancerType: lb.value };
    if (limit.value.trim() !== '') body.maxSessionLimit = numberOrText(limit.value);
    if (assign.value) body.personalDesktopAssignmentType = assign.value;
    apps.into(body);
    button.disabled = true;
    try {
      if (!n) throw new ApiError(400, 'InvalidParameter', 'name: a host pool needs a name');
      // PUT replaces an existing pool; creating must not overwrite one, so
      // the broker is asked to refuse (409 Conflict) if the pool exists.
      const p = await api('PUT', `/hostPools/${seg(n)}`, body, undefined, { 'If-None-Match': '*' });
      const warn = p.warnings.length ? ` Warning: ${p.warnings.join(' ')}` : '';
      say(out, `Created host pool ${p.name} (${p.hostPoolType}, ${p.loadBalancerType}, limit ${limitText(p.maxSessionLimit)}).${warn}`, p.warnings.length ? 'warning' : 'ok');
      name.value = '';
      limit.value = '';
      kick();
    } catch (ex) {
      say(out, ex.toString(), 'error');
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

// ---------------------------------------------------------------- one pool


function poolView(name, params) {
  const v = { closed: false };
  const { size, page, skip } = pageParams(params);
  const link = (p, s) => `#/pools/${seg(name)}${query({ page: p > 1 ? p : '', size: s !== DEFAULT_PAGE_SIZE ? s : '' })}`;

  const summary = h('dl', { id: 'pool-summary', class: 'summary' });
  const stat = (key, label) => {
    const dd = h('dd', { dataset: { stat: key } });
    summary.append(h('div', {}, h('dt', {}, label), dd));
    return dd;
  };
  const s = {
    type: stat('type', 'Type'),
    lb: stat('lb', 'Algorithm'),
    limit: stat('limit', 'Max session limit'),
    hosts: stat('hosts', 'Session hosts'),
    sessions: stat('sessions', 'Sessions'),
    avg: stat('avg', 'Sessions per host'),
    rate: stat('rate', 'Change'),
    connecting: stat('connecting', 'Connecting (this page)'),
  };
  const trend = h('div', { class: 'trend-big' });
  const notFound = message('pool-error');

  // Settings: algorithm and limit, through PATCH.
  const lb = select('pool-lb', ALGORITHMS.map((t) => [t, t]), '');
  const limit = h('input', { id: 'pool-limit', type: 'text', inputmode: 'numeric', autocomplete: 'off' });
  let dirty = false;
  let pool = null;
  lb.addEventListener('input', () => (dirty = true));
  limit.addEventListener('input', () => (dirty = true));
  const apps = publishingFields('pool', () => (dirty = true));
  const saved = message('pool-settings-message');
  const save = h('button', { type: 'submit' }, 'Save');
  const settings = h('form', { id: 'pool-settings', class: 'card inline', method: 'post', novalidate: true }, h('h2', {}, 'Settings'), field('Load balancer (algorithm)', lb), field('Max session limit', limit, '0..999999'), apps.fields, save, saved);
  settings.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (!pool) return;
    const body = {};
    if (lb.value !== pool.loadBalancerType) body.loadBalancerType = lb.value;
    if (limit.value.trim() !== String(pool.maxSessionLimit)) body.maxSessionLimit = numberOrText(limit.value);
    apps.into(body, pool);
    if (Object.keys(body).length === 0) {
      say(saved, 'Nothing changed.', 'info');
      return;
    }
    save.disabled = true;
    try {
      const p = await api('PATCH', `/hostPools/${seg(name)}`, body);
      dirty = false;
      const warn = p.warnings.length ? ` Warning: ${p.warnings.join(' ')}` : '';
      say(saved, `Saved: ${p.loadBalancerType}, limit ${limitText(p.maxSessionLimit)}, ${p.preferredAppGroupType} preferred, applications as ${p.applicationMode}.${warn}`, p.warnings.length ? 'warning' : 'ok');
      kick();
    } catch (ex) {
      say(saved, ex.toString(), 'error');
    } finally {
      save.disabled = false;
    }
  });

  const heat = h('div', { id: 'heat', class: 'heat', role: 'list', 'aria-label': 'sessions and load index per host' });
  const heatNote = h('p', { id: 'heat-note', class: 'muted' });
  const hostsError = message('hosts-error');
  const tbody = h('tbody');
  const table = h(
    'table',
    { id: 'hosts-table', class: 'grid' },
    h(
      'thead',
      {},
      h('tr', {}, th('Host'), th('Status'), th('New sessions'), th('Sessions'), th('Connecting', 'num'), th('Load index'), th('Last heartbeat'), th('Reported by'), th('Owner'), th('Power')),
    ),
    tbody,
  );
  const pg = pager('hosts-pager', link, size);

  v.el = h(
    'section',
    { class: 'view' },
    h(
      'p',
      { class: 'crumbs' },
      h('a', { href: '#/pools' }, 'Host pools'),
      ' › ',
      name,
      ' · ',
      h('a', { href: `#/sessions${query({ pool: name })}` }, 'its sessions'),
      ' · ',
      h('a', { id: 'scaling-link', href: `#/pools/${seg(name)}/scaling` }, 'scaling actions'),
      ' · ',
      h('a', { id: 'apps-link', href: `#/applications${query({ pool: name })}` }, 'applications'),
    ),
    h('h1', {}, name),
    notFound,
    h('div', { class: 'pool-top' }, h('div', {}, summary, trend), may.edit() ? settings : null),
    h('h2', {}, 'Sessions and load per host'),
    heatNote,
    heat,
    h('h2', {}, 'Session hosts'),
    pg.el,
    hostsError,
    h('div', { class: 'scroll' }, table),
    // Registration tokens, hosts and users' tickets are the admin's (T1).
    may.edit() ? dayOneTools(name, () => pool, kick) : null,
  );

  v.failed = (e) => {
    if (e.status === 404) say(notFound, e.toString(), 'error');
  };

  v.refresh = async () => {
    const [p, hosts] = await Promise.all([
      api('GET', `/hostPools/${seg(name)}`),
      api('GET', `/hostPools/${seg(name)}/sessionHosts${query({ pageSize: size, initialSkip: skip })}`),
    ]);
    if (v.closed) return;
    pool = p;
    say(notFound, '', '');
    sample(name, p.sessionCount, Date.now());
    const limited = p.maxSessionLimit < UNLIMITED;
    setText(s.type, p.hostPoolType);
    setText(s.lb, p.loadBalancerType);
    setText(s.limit, limitText(p.maxSessionLimit));
    setText(s.hosts, num(p.sessionHostCount));
    setText(s.sessions, num(p.sessionCount));
    setText(s.avg, p.sessionHostCount ? (p.sessionCount / p.sessionHostCount).toFixed(1) : '—');
    setText(s.rate, rateText(rate(name)));
    setText(s.connecting, num(hosts.value.reduce((a, x) => a + x.connectingSessions, 0)));
    replace(trend, sparkline(counts(name), 320, 40, `session count of ${name} over the last minutes`), h('small', { class: 'muted' }, 'sessions, last 3 minutes'));
    if (!dirty) {
      lb.value = p.loadBalancerType;
      limit.value = String(p.maxSessionLimit);
      apps.set(p);
    }

    const list = hosts.value;
    const from = list.length ? skip + 1 : 0;
    const lastPage = Math.max(1, Math.ceil(p.sessionHostCount / size));
    pg.update(
      list.length ? `Hosts ${num(from)}–${num(skip + list.length)} of ${num(p.sessionHostCount)}` : `No hosts on page ${page} (${num(p.sessionHostCount)} in all)`,
      page,
      lastPage,
      Boolean(hosts.nextLink),
    );

    // Heat view: one cell per host of the page; the bar is sessions
    // against the limit (or against the busiest host shown when the pool
    // has no real limit), the second bar the load index out of 100.
    let fewest = list.length ? Infinity : 0;
    let busiest = 0;
    for (const x of list) {
      fewest = Math.min(fewest, x.sessions);
      busiest = Math.max(busiest, x.sessions);
    }
    const most = Math.max(1, busiest);
    const scale = limited ? Math.max(1, p.maxSessionLimit) : most;
    setText(
      heatNote,
      list.length
        ? `Hosts ${num(from)}–${num(skip + list.length)}: fewest ${fewest}, most ${busiest} sessions (spread ${busiest - fewest}); ` +
            `a full upper bar is ${limited ? `the limit, ${scale}` : `${scale}, the busiest host shown`}; the lower bar is the load index out of 100.`
        : `No session hosts on this page. ${may.edit() ? 'Enroll agents with a registration token or add a host below' : 'An administrator adds them'} (or through the API or the CLI: sessionhost add).`,
    );
    keyedRows(
      heat,
      list,
      (x) => x.name,
      (x) =>
        h(
          'div',
          { class: 'cell', role: 'listitem', dataset: { host: x.name } },
          h('span', { class: 'cell-name' }, x.name),
          h('span', { class: 'cell-bars', 'aria-hidden': 'true' }, h('span', { class: 'cb s' }, h('span', { class: 'fill' })), h('span', { class: 'cb l' }, h('span', { class: 'fill' }))),
          h('span', { class: 'cell-text' }),
          h('span', { class: 'cell-flags' }),
        ),
      (cell, x) => {
        const [sb, lbar] = cell.querySelectorAll('.cb .fill');
        sb.style.width = `${Math.min(100, (x.sessions / scale) * 100).toFixed(1)}%`;
        lbar.style.width = `${Math.max(0, Math.min(100, x.loadIndex))}%`;
        const flags = [];
        if (!x.allowNewSession) flags.push('draining');
        if (x.status !== 'Available') flags.push(x.status.toLowerCase());
        if (limited && x.sessions >= p.maxSessionLimit) flags.push('full');
        if (x.connectingSessions > 0) flags.push(`${x.connectingSessions} connecting`);
        cell.classList.toggle('drained', !x.allowNewSession);
        cell.classList.toggle('down', x.status !== 'Available');
        cell.classList.toggle('full', limited && x.sessions >= p.maxSessionLimit);
        const li = x.loadIndex < 0 ? '?' : x.loadIndex;
        setText(cell.querySelector('.cell-text'), `${x.sessions}${limited ? `/${p.maxSessionLimit}` : ''} · LI ${li}`);
        setText(cell.querySelector('.cell-flags'), flags.length ? flags.join(', ') : 'open');
        cell.title = `${x.name}: ${x.sessions} sessions (${x.connectingSessions} connecting), load index ${x.loadIndex < 0 ? 'unknown' : x.loadIndex}, ${x.status}${x.allowNewSession ? '' : ', draining'}`;
      },
    );

    keyedRows(tbody, list, (x) => x.name, (x) => hostRow(name, x, hostsError), (tr, x) => updateHostRow(tr, x, p, most));
  };
  return v;
}

function hostRow(pool, x, errorEl) {
  const toggle = h('input', { type: 'checkbox', role: 'switch', class: 'drain', dataset: { host: x.name }, id: `allow-${x.name}` });
  // A role that may not drain sees the state, not a switch.
  const label = may.operate()
    ? h('label', { class: 'switch', for: toggle.id }, toggle, h('span', { class: 'switch-text' }))
    : h('span', {}, h('span', { class: 'switch-text' }));
  const sessions = bar('sessions');
  const load = bar('load');
  const tr = h(
    'tr',
    { dataset: { host: x.name } },
    h('th', { scope: 'row' }, x.name, h('br'), h('small', { class: 'muted addr' }), h('br'), h('small', { class: 'muted image' })),
    h('td', { class: 'status' }),
    h('td', { class: 'allow' }, label),
    h('td', { class: 'sessions' }, sessions.el),
    h('td', { class: 'connecting num' }),
    h('td', { class: 'load' }, load.el),
    h('td', { class: 'heartbeat' }),
    h('td', { class: 'reporter' }, h('span', { class: 'source' }), h('small', { class: 'scrape-error', hidden: true })),
    h('td', { class: 'owner' }),
    h('td', { class: 'power' }, h('span', { class: 'power-state' }), may.operate() ? powerButtons(pool, x.name, errorEl) : null),
  );
  toggle.addEventListener('change', async () => {
    const allow = toggle.checked;
    tr.dataset.busy = '1';
    toggle.disabled = true;
    try {
      const out = await api('PATCH', `/hostPools/${seg(pool)}/sessionHosts/${seg(x.name)}`, { allowNewSession: allow });
      say(errorEl, `${out.name}: ${out.allowNewSession ? 'accepts new sessions again' : 'drained: takes no new session; its users still reconnect to it'}.`, 'ok');
      toggle.checked = out.allowNewSession;
    } catch (ex) {
      toggle.checked = !allow;
      say(errorEl, ex.toString(), 'error');
    } finally {
      delete tr.dataset.busy;
      toggle.disabled = false;
      setText(label.querySelector('.switch-text'), toggle.checked ? 'Accepting' : 'Draining');
      kick();
    }
  });
  return tr;
}

function updateHostRow(tr, x, p, most) {
  const limited = p.maxSessionLimit < UNLIMITED;
  setText(tr.querySelector('.addr'), x.address);
  // The image it runs (rule U1): the host's own word, shown as text.
  setText(tr.querySelector('.image'), x.imageVersion ? `image ${x.imageVersion}` : '');
  const status = tr.querySelector('.status');
  setText(status, STATUS_MARK[x.status] || x.status);
  status.className = `status ${x.status.toLowerCase()}`;
  if (!tr.dataset.busy) {
    const toggle = tr.querySelector('input.drain');
    if (toggle) toggle.checked = x.allowNewSession;
    setText(tr.querySelector('.switch-text'), x.allowNewSession ? 'Accepting' : 'Draining');
  }
  tr.classList.toggle('drained', !x.allowNewSession);
  setBar(tr.querySelector('.sessions'), x.sessions / (limited ? Math.max(1, p.maxSessionLimit) : most), limited ? `${x.sessions} / ${p.maxSessionLimit}` : String(x.sessions));
  setText(tr.querySelector('.connecting'), x.connectingSessions);
  setBar(tr.querySelector('.load'), x.loadIndex / 100, x.loadIndex < 0 ? 'unknown' : String(x.loadIndex));
  const hb = tr.querySelector('.heartbeat');
  setText(hb, ago(x.lastHeartBeat));
  hb.title = x.lastHeartBeat || 'no heartbeat yet';
  // The scrape error is the watching agent's text about the host's
  // exporter, from the host's side of the network: text only (setText),
  // like every other value here.
  setText(tr.querySelector('.source'), SOURCE_TEXT[x.heartbeatSource] || x.heartbeatSource || '—');
  const scrape = tr.querySelector('.scrape-error');
  setText(scrape, x.scrapeError || '');
  scrape.hidden = !x.scrapeError;
  scrape.title = x.scrapeError ? 'what the last scrape of the exporter found wrong' : '';
  setText(tr.querySelector('.owner'), x.assignedUser || '—');
  const power = x.powerState || 'Running';
  setText(tr.querySelector('.power-state'), power);
  tr.dataset.power = power;
  const start = tr.querySelector('button.start');
  const stop = tr.querySelector('button.stop');
  // Only the actions the broker can take on this pool's hosts (its
  // powerActions: none without a power driver); a broker too old to say
  // gets both, and refuses what it cannot do with its own message.
  const actions = Array.isArray(p.powerActions) ? p.powerActions : ['start', 'stop'];
  if (start) start.hidden = !actions.includes('start');
  if (stop) stop.hidden = !actions.includes('stop');
  if (start && !start.dataset.busy) start.disabled = power !== 'Stopped' && power !== 'Unknown';
  if (stop && !stop.dataset.busy) stop.disabled = power !== 'Running' && power !== 'Unknown';
}

/**
 * Start and Stop of one host (POST …/start, …/stop: rule A9), for roles
 * that may operate. Stop asks for a second click, as log off does; a host
 * with sessions is refused (409) and the broker's message is shown.
 */
function powerButtons(pool, host, errorEl) {
  const start = h('button', { type: 'button', class: 'start secondary', dataset: { host } }, 'Start');
  const stop = h('button', { type: 'button', class: 'stop secondary', dataset: { host } }, 'Stop');
  const act = async (button, verb) => {
    button.dataset.busy = '1';
    button.disabled = true;
    try {
      const a = await api('POST', `/hostPools/${seg(pool)}/sessionHosts/${seg(host)}/${verb}`);
      say(errorEl, `${host}: ${a.action} asked (${a.outcome}); see the pool's scaling actions.`, 'ok');
    } catch (ex) {
      say(errorEl, ex.toString(), 'error');
    } finally {
      delete button.dataset.busy;
      button.disabled = false;
      kick();
    }
  };
  start.addEventListener('click', () => act(start, 'start'));
  let armed = null;
  stop.addEventListener('click', () => {
    if (!armed) {
      setText(stop, 'Confirm stop');
      stop.classList.add('armed');
      armed = setTimeout(() => {
        armed = null;
        setText(stop, 'Stop');
        stop.classList.remove('armed');
      }, CONFIRM_MS);
      return;
    }
    clearTimeout(armed);
    armed = null;
    setText(stop, 'Stop');
    stop.classList.remove('armed');
    act(stop, 'stop');
  });
  return h('span', { class: 'power-buttons' }, ' ', start, ' ', stop);
}

// ---------------------------------------------------------------- a pool's first hosts and users

// ---------------------------------------------------------------- sessions

function sessionsView(params) {
  const v = { closed: false };
  let pool = params.get('pool') || '';
  const user = params.get('user') || '';
  const host = params.get('host') || '';
  const { size, page, skip } = pageParams(params);
  const link = (p, s, over = {}) =>
    `#/sessions${query({ pool, user, host, page: p > 1 ? p : '', size: s !== DEFAULT_PAGE_SIZE ? s : '', ...over })}`;

  const poolSel = h('select', { id: 's-pool' });
  const userIn = h('input', { id: 's-user', type: 'search', value: user, autocomplete: 'off', spellcheck: 'false', placeholder: 'alice@contoso.com' });
  const hostIn = h('input', { id: 's-host', type: 'search', value: host, autocomplete: 'off', spellcheck: 'false', placeholder: 'h1' });
  const filter = h(
    'form',
    { id: 'sessions-filter', class: 'card inline', method: 'post', novalidate: true },
    field('Host pool', poolSel),
    field('User', userIn, 'whole name, any case'),
    field('Session host', hostIn),
    h('button', { type: 'submit' }, 'Filter'),
    h('a', { class: 'button secondary', href: `#/sessions${query({ pool })}` }, 'Clear'),
  );
  const go = () => {
    pool = poolSel.value;
    location.hash = `#/sessions${query({ pool, user: userIn.value.trim(), host: hostIn.value.trim() })}`;
  };
  filter.addEventListener('submit', (e) => {
    e.preventDefault();
    go();
  });
  poolSel.addEventListener('change', () => {
    location.hash = `#/sessions${query({ pool: poolSel.value })}`;
  });

  const errorEl = message('sessions-error');
  const tbody = h('tbody');
  const empty = h('p', { id: 'sessions-empty', class: 'muted', hidden: true });
  const table = h(
    'table',
    { id: 'sessions-table', class: 'grid' },
    h('thead', {}, h('tr', {}, th('User'), th('Session host'), th('State'), th('Created'), th('Session id'), th('Action'))),
    tbody,
  );
  const pg = pager('sessions-pager', link, size);
  const compose = messageForm(() => pool, errorEl);
  // Recently ended sessions, with why each ended (shown below the last page
  // of live ones: the broker lists them after the live sessions).
  const endedBody = h('tbody');
  const ended = h(
    'div',
    { id: 'sessions-ended', hidden: true },
    h('h2', {}, 'Recently ended'),
    h(
      'div',
      { class: 'scroll' },
      h('table', { id: 'ended-table', class: 'grid' }, h('thead', {}, h('tr', {}, th('User'), th('Session host'), th('State when it ended'), th('Ended'), th('Reason'), th('Session id'))), endedBody),
    ),
  );
  v.el = h('section', { class: 'view' }, h('h1', {}, 'Sessions'), filter, compose.el, pg.el, errorEl, h('div', { class: 'scroll' }, table), empty, ended);

  v.refresh = async () => {
    const sessionsOf = (name) => api('GET', `/hostPools/${seg(name)}/userSessions${query({ user, sessionHost: host, pageSize: size, initialSkip: skip })}`);
    // With the pool known, its sessions are asked for alongside the pools
    // (a refusal of it is reported below, once the pool list is shown).
    const early = pool ? sessionsOf(pool) : null;
    early?.catch(() => {});
    const pools = (await api('GET', '/hostPools')).value;
    if (v.closed) return;
    if (!pool && pools.length) pool = pools[0].name;
    const names = pools.map((p) => p.name);
    if (pool && !names.includes(pool)) names.unshift(pool);
    if ([...poolSel.options].map((o) => o.value).join('\n') !== names.join('\n')) {
      replace(poolSel, names.map((n) => h('option', { value: n }, n)));
    }
    poolSel.value = pool;
    const p = pools.find((x) => x.name === pool);
    if (p) sample(p.name, p.sessionCount, Date.now());
    if (!pool) {
      empty.hidden = false;
      setText(empty, 'No host pools yet.');
      pg.update('', 1, null, false);
      return;
    }
    const r = await (early ?? sessionsOf(pool));
    if (v.closed) return;
    const list = r.value;
    const filtered = Boolean(user || host);
    const total = !filtered && p ? p.sessionCount : null;
    const from = list.length ? skip + 1 : 0;
    const which = filtered ? ` (${[user && `user ${user}`, host && `host ${host}`].filter(Boolean).join(', ')})` : '';
    pg.update(
      list.length || page === 1
        ? `Sessions ${num(from)}–${num(skip + list.length)}${total !== null ? ` of ${num(total)}` : ''}${which}`
        : `No sessions on page ${page}${which}`,
      page,
      total !== null ? Math.max(1, Math.ceil(total / size)) : null,
      Boolean(r.nextLink),
    );
    empty.hidden = list.length > 0;
    setText(empty, filtered ? 'No session matches.' : 'No sessions in this pool.');
    const now = Date.now();
    keyedRows(
      tbody,
      list,
      (x) => x.id,
      (x) => sessionRow(pool, x, errorEl, compose.open),
      (tr, x) => {
        setText(tr.querySelector('.state'), x.sessionState);
        const created = tr.querySelector('.created');
        setText(created, ago(x.createTime, now));
        created.title = x.createTime;
      },
    );
    const gone = r.nextLink
      ? []
      : (await api('GET', `/hostPools/${seg(pool)}/userSessions${query({ user, sessionHost: host, includeEnded: 'true', initialSkip: skip + list.length, pageSize: ENDED_SHOWN })}`)).value.filter((x) => x.endReason);
    if (v.closed) return;
    ended.hidden = gone.length === 0;
    keyedRows(
      endedBody,
      gone,
      (x) => x.id,
      (x) =>
        h(
          'tr',
          { dataset: { id: x.id } },
          h('td', {}, x.userPrincipalName),
          h('td', {}, x.sessionHost),
          h('td', {}, x.sessionState),
          h('td', { class: 'ended' }),
          h('td', { class: 'reason' }, x.endReason),
          h('td', { class: 'mono' }, x.id),
        ),
      (tr, x) => {
        const at = tr.querySelector('.ended');
        setText(at, ago(x.endedAt, now));
        at.title = x.endedAt;
      },
    );
  };
  return v;
}

/** Ended sessions the Sessions view shows at most (the latest). */
const ENDED_SHOWN = 100;

/**
 * The "Send message" form (POST …/userSessions/{id}/sendMessage), shown for
 * one session when its row's button is clicked; the agent of the session's
 * host shows the message after its next heartbeat.
 */
function messageForm(poolOf, errorEl) {
  const to = h('p', { class: 'message-to' });
  const title = h('input', { id: 'message-title', type: 'text', autocomplete: 'off', maxlength: '256', value: 'Message from your administrator' });
  const text = h('textarea', { id: 'message-text', rows: '3', maxlength: '4096' });
  const send = h('button', { type: 'submit' }, 'Send message');
  const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
  const el = h('form', { id: 'message-form', class: 'card', method: 'post', novalidate: true, hidden: true }, h('h2', {}, 'Send a message'), to, field('Title', title), field('Message', text, 'shown on the user’s desktop by the host’s agent'), send, cancel);
  let target = null;
  cancel.addEventListener('click', () => {
    el.hidden = true;
    target = null;
  });
  el.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (!target) return;
    send.disabled = true;
    try {
      const m = await api('POST', `/hostPools/${seg(poolOf())}/userSessions/${seg(target.id)}/sendMessage`, { title: title.value, message: text.value });
      say(errorEl, `Message queued for ${m.user} (session ${m.sessionId}); their host shows it after its next heartbeat.`, 'ok');
      el.hidden = true;
      text.value = '';
      target = null;
    } catch (ex) {
      say(errorEl, ex.toString(), 'error');
    } finally {
      send.disabled = false;
    }
  });
  const open = (x) => {
    target = x;
    setText(to, `To ${x.userPrincipalName}, session ${x.id} on ${x.sessionHost}`);
    el.hidden = false;
    text.focus();
  };
  return { el, open };
}

function sessionRow(pool, x, errorEl, compose) {
  const button = h('button', { type: 'button', class: 'logoff secondary', dataset: { id: x.id, user: x.userPrincipalName } }, 'Log off');
  let armed = null;
  button.addEventListener('click', async () => {
    if (!armed) {
      setText(button, 'Confirm log off');
      button.classList.add('armed');
      armed = setTimeout(() => {
        armed = null;
        setText(button, 'Log off');
        button.classList.remove('armed');
      }, CONFIRM_MS);
      return;
    }
    clearTimeout(armed);
    armed = null;
    button.disabled = true;
    try {
      await api('DELETE', `/hostPools/${seg(pool)}/userSessions/${seg(x.id)}`);
      say(errorEl, `Logged off ${x.userPrincipalName} (session ${x.id} on ${x.sessionHost}).`, 'ok');
    } catch (ex) {
      say(errorEl, ex.toString(), 'error');
      button.disabled = false;
      setText(button, 'Log off');
      button.classList.remove('armed');
    }
    kick();
  });
  return h(
    'tr',
    { dataset: { id: x.id, user: x.userPrincipalName } },
    h('th', { scope: 'row' }, h('a', { href: `#/sessions${query({ pool, user: x.userPrincipalName })}`, title: `only ${x.userPrincipalName}` }, x.userPrincipalName)),
    h('td', { class: 'host' }, h('a', { href: `#/sessions${query({ pool, host: x.sessionHost })}`, title: `only sessions on ${x.sessionHost}` }, x.sessionHost)),
    h('td', { class: 'state' }),
    h('td', { class: 'created' }),
    h('td', { class: 'id' }, h('code', {}, x.id)),
    h('td', {}, may.operate() ? [button, ' ', messageButton(x, compose)] : null),
  );
}

function messageButton(x, compose) {
  const b = h('button', { type: 'button', class: 'send-message secondary', dataset: { id: x.id } }, 'Send message');
  b.addEventListener('click', () => compose(x));
  return b;
}

// ---------------------------------------------------------------- start

route();
