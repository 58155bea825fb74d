// records.js — the console's views of what happened: a pool's power and
// scaling actions, and the audit log. Both are read-only pages of the
// public API's records, newest first, refreshed like every view (app.js).

import { api, query, seg } from './api.js';
import { DEFAULT_PAGE_SIZE, PAGE_SIZES, field, h, inert, keyedRows, message, say, setText, th } from './dom.js';

// ---------------------------------------------------------------- scaling actions

/** A pool's power and scaling actions (rule A10), newest first, one page. */
export function scalingView(name, params) {
  const v = { closed: false };
  const size = PAGE_SIZES.includes(Number(params.get('size'))) ? Number(params.get('size')) : DEFAULT_PAGE_SIZE;
  const errorEl = message('scaling-error');
  const tbody = h('tbody');
  const table = h(
    'table',
    { id: 'scaling-table', class: 'grid' },
    h(
      'thead',
      {},
      h('tr', {}, th('Time'), th('Phase'), th('Action'), th('Host'), th('Reason'), th('Figures'), th('Outcome'), th('Message'), th('By')),
    ),
    tbody,
  );
  const empty = h('p', { id: 'scaling-empty', class: 'muted', hidden: true }, 'No power or scaling actions yet.');
  v.el = h(
    'section',
    { class: 'view' },
    h('p', { class: 'crumbs' }, h('a', { href: '#/pools' }, 'Host pools'), ' › ', h('a', { href: `#/pools/${seg(name)}` }, name), ' › scaling actions'),
    h('h1', {}, `Scaling actions of ${name}`),
    errorEl,
    h('div', { class: 'scroll' }, table),
    empty,
  );
  const figures = (a) =>
    [
      a.usedCapacityPct != null ? `used ${a.usedCapacityPct}%` : null,
      a.thresholdPct != null ? `threshold ${a.thresholdPct}%` : null,
      a.runningHosts != null ? `running ${a.runningHosts}` : null,
      a.minimumHosts != null ? `minimum ${a.minimumHosts}` : null,
    ]
      .filter(Boolean)
      .join(', ') || '—';
  v.refresh = async () => {
    const r = await api('GET', `/hostPools/${seg(name)}/scalingActions${query({ pageSize: size })}`);
    if (v.closed) return;
    say(errorEl, '', '');
    empty.hidden = r.value.length > 0;
    keyedRows(
      tbody,
      r.value,
      (a) => a.id,
      (a) =>
        h(
          'tr',
          { dataset: { id: a.id, host: a.sessionHost, action: a.action } },
          h('td', { class: 'time' }, a.time),
          h('td', { class: 'phase' }),
          h('td', { class: 'action' }, a.action),
          h('th', { scope: 'row', class: 'host' }, a.sessionHost),
          h('td', { class: 'reason' }),
          h('td', { class: 'figures' }),
          h('td', { class: 'outcome' }),
          h('td', { class: 'message-text' }),
          h('td', { class: 'actor' }),
        ),
      (tr, a) => {
        setText(tr.querySelector('.phase'), a.phase || '—');
        setText(tr.querySelector('.reason'), a.reason);
        setText(tr.querySelector('.figures'), figures(a));
        setText(tr.querySelector('.outcome'), a.outcome);
        tr.dataset.outcome = a.outcome;
        setText(tr.querySelector('.message-text'), a.message || '—');
        setText(tr.querySelector('.actor'), a.actor || 'scaling plan');
      },
    );
  };
  v.failed = (e) => say(errorEl, e.toString(), 'error');
  return v;
}

// ---------------------------------------------------------------- audit

/** The audit log (rule T5), newest first, one page, filtered by actor and pool. */
export function auditView(params) {
  const v = { closed: false };
  const actor = params.get('actor') || '';
  const pool = params.get('pool') || '';
  const actorIn = h('input', { id: 'audit-actor', type: 'text', value: actor, autocomplete: 'off', placeholder: 'credential:helpdesk' });
  const poolIn = h('input', { id: 'audit-pool', type: 'text', value: pool, autocomplete: 'off' });
  const filter = h('form', { id: 'audit-filter', class: 'card inline', method: 'get', novalidate: true }, field('Actor', actorIn), field('Host pool', poolIn), h('button', { type: 'submit' }, 'Filter'));
  filter.addEventListener('submit', (e) => {
    e.preventDefault();
    location.hash = `#/audit${query({ actor: actorIn.value.trim(), pool: poolIn.value.trim() })}`;
  });
  const errorEl = message('audit-error');
  const tbody = h('tbody');
  const table = h(
    'table',
    { id: 'audit-table', class: 'grid' },
    h('thead', {}, h('tr', {}, th('Time'), th('Actor'), th('Action'), th('Outcome', 'num'), th('Change'))),
    tbody,
  );
  const empty = h('p', { class: 'muted', hidden: true }, 'No entries.');
  v.el = h('section', { class: 'view' }, h('h1', {}, 'Audit log'), filter, errorEl, h('div', { class: 'scroll' }, table), empty);
  v.refresh = async () => {
    const r = await api('GET', `/auditLog${query({ actor, hostPool: pool, pageSize: 100 })}`);
    if (v.closed) return;
    empty.hidden = r.value.length > 0;
    keyedRows(
      tbody,
      r.value,
      (e) => String(e.id),
      (e) =>
        h(
          'tr',
          { dataset: { id: String(e.id), actor: e.actor } },
          h('td', { class: 'time' }, inert(e.time)),
          h('th', { scope: 'row', class: 'actor' }, inert(e.actor)),
          h('td', { class: 'action' }, h('code', {}, inert(e.action))),
          h('td', { class: `outcome num${e.outcome >= 400 ? ' refused' : ''}` }, String(e.outcome)),
          h('td', { class: 'change' }, inert(changeText(e.before, e.after))),
        ),
      () => {},
    );
  };
  v.failed = (e) => say(errorEl, e.toString(), 'error');
  return v;
}

/** What changed between two JSON objects, as `field: old → new`, briefly. */
function changeText(before, after) {
  if (before === null && after === null) return '—';
  if (before === null && after && after.ticketFor !== undefined) return `ticket for ${after.ticketFor}, until ${after.expirationTime}`;
  if (before === null) return 'created';
  if (after === null) return 'removed';
  const diffs = [];
  for (const k of Object.keys(after)) {
    const a = JSON.stringify(before[k]);
    const b = JSON.stringify(after[k]);
    if (a !== b && !['lastHeartBeat', 'metrics', 'loadIndex'].includes(k)) diffs.push(`${k}: ${a} → ${b}`);
  }
  return diffs.length ? diffs.slice(0, 4).join('; ') : 'no change';
}
