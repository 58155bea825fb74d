// workspace.js — what the broker publishes besides desktops (rule F1), as
// AVD's portal shows it in its "Applications" and "Application groups"
// blades: a pool's published applications with their icons, and the
// application groups that give them (or the pool's desktop) to users and
// groups of users; and, for the pool forms of app.js, the pool's two
// settings about applications.
//
// Everyone who may read sees the lists; the forms and the delete buttons
// are the admin's (the broker refuses them to anyone else anyway, rule
// T1). What the broker refuses is shown as it says it, naming the field;
// the lists are only ever the broker's answers, so nothing it refused is
// shown as done. Every value from the API goes in as text.

import { api, ApiError, query, seg } from './api.js';
import { CONFIRM_MS, field, h, inert, keyedRows, message, num, replace, say, select, setText, th } from './dom.js';

const POLICIES = [
  ['None', 'None: no arguments'],
  ['Any', 'Any: a launch may give arguments'],
  ['Fixed', 'Fixed: always the command line below'],
];
const GROUP_KINDS = ['RemoteApp', 'Desktop'];
/** The API's bound on an icon once decoded (placement's MAX_ICON_BYTES). */
const MAX_ICON_BYTES = 64 * 1024;
/**
 * The largest icon file the console reads. Files up to it are sent, so
 * that the broker judges them and says why it refuses one; a larger file
 * would not fit the API's 256 KiB request body once in base64, and is not
 * read at all.
 */
const MAX_ICON_FILE_BYTES = 2 * MAX_ICON_BYTES;
/** Applications whose icons are fetched at once (one GET each). */
const ICON_FETCHES = 4;
/** Users or groups a row of the groups table names before "and N more". */
const NAMES_SHOWN = 8;
/** Base64 as the API answers it: nothing else goes into an image's URL. */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

// ---------------------------------------------------------------- shared

/** `items` as "a, b, c and 4 more" (at most `shown` of them), or "—". */
function listText(items, shown = NAMES_SHOWN) {
  if (!items || items.length === 0) return '—';
  const head = items.slice(0, shown).map(inert).join(', ');
  return items.length > shown ? `${head} and ${num(items.length - shown)} more` : head;
}

/** The non-empty entries of `text` split at `sep`, trimmed. */
function entries(text, sep) {
  return text
    .split(sep)
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Fills a `<select>` with `names` (only when they changed), `chosen` selected. */
function fillSelect(sel, names, chosen) {
  if ([...sel.options].map((o) => o.value).join('\n') !== names.join('\n')) {
    replace(sel, names.map((n) => h('option', { value: n }, n)));
  }
  sel.value = chosen;
}

/**
 * A delete button that asks for a second click within CONFIRM_MS, as log
 * off and stop do; `act` runs on the second and answers whether it was
 * done (a refused delete leaves the button as it was).
 */
function deleteButton(data, act) {
  const b = h('button', { type: 'button', class: 'delete secondary', dataset: data }, 'Delete');
  let armed = null;
  const disarm = () => {
    clearTimeout(armed);
    armed = null;
    setText(b, 'Delete');
    b.classList.remove('armed');
  };
  b.addEventListener('click', async () => {
    if (!armed) {
      setText(b, 'Confirm delete');
      b.classList.add('armed');
      armed = setTimeout(disarm, CONFIRM_MS);
      return;
    }
    disarm();
    b.disabled = true;
    try {
      await act();
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

/**
 * A view's message line: what an action answered, or why the last refresh
 * failed (cleared by the next refresh that works, not by an action's).
 */
function notices(id) {
  const el = message(id);
  return {
    el,
    said(text, kind) {
      delete el.dataset.from;
      say(el, text, kind);
    },
    failed(e) {
      say(el, e.toString(), 'error');
      el.dataset.from = 'refresh';
    },
    refreshed() {
      if (el.dataset.from !== 'refresh') return;
      delete el.dataset.from;
      say(el, '', '');
    },
  };
}

/** A small secondary button. */
const button = (cls, text, data, onclick) => h('button', { type: 'button', class: `${cls} secondary`, dataset: data, onclick }, text);

// ---------------------------------------------------------------- the pool forms

/**
 * The pool's settings of rules F1 and F2 for app.js's pool forms:
 * `preferredAppGroupType` and `applicationMode`. `fields` go in the form;
 * `set(pool)` shows a pool's values; `into(body, pool)` adds the chosen
 * ones to a request body (with `pool`, only those that differ from it).
 */
export function publishingFields(prefix, onInput) {
  const kind = select(`${prefix}-app-group-type`, [['', '(default)'], ['Desktop', 'Desktop'], ['RemoteApp', 'RemoteApp']], '');
  const mode = select(`${prefix}-application-mode`, [['', '(default)'], ['RemoteApp', 'RemoteApp'], ['AlternateShell', 'AlternateShell']], '');
  if (onInput) for (const s of [kind, mode]) s.addEventListener('input', onInput);
  return {
    fields: [
      field('Preferred app group type', kind, 'what a user given both the desktop and applications sees; default Desktop'),
      field('Application mode', mode, 'RemoteApp (default): windows of their own, Windows hosts; AlternateShell: the session’s only program, xrdp hosts'),
    ],
    set(p) {
      kind.value = p.preferredAppGroupType || '';
      mode.value = p.applicationMode || '';
    },
    into(body, p) {
      if (kind.value && kind.value !== p?.preferredAppGroupType) body.preferredAppGroupType = kind.value;
      if (mode.value && mode.value !== p?.applicationMode) body.applicationMode = mode.value;
    },
  };
}

// ---------------------------------------------------------------- applications

/**
 * A pool's published applications, `#/applications?pool=NAME`: the list
 * (the first pool's when none is named), each with its icon, and for the
 * admin the form that publishes or replaces one and a delete button per
 * row. `edit`: the admin's forms are shown; `changed`: refresh the page.
 */
export function applicationsView(params, { edit, changed }) {
  const v = { closed: false };
  let pool = params.get('pool') || '';
  const poolSel = h('select', { id: 'apps-pool' });
  poolSel.addEventListener('change', () => {
    location.hash = `#/applications${query({ pool: poolSel.value })}`;
  });
  const groupsLink = h('a', { href: '#/appgroups' }, 'Application groups');
  const picker = h('div', { class: 'card inline' }, field('Host pool', poolSel), h('p', {}, 'Who is given them: ', groupsLink, '.'));
  const notes = notices('apps-message');
  const tbody = h('tbody');
  const table = h(
    'table',
    { id: 'apps-table', class: 'grid' },
    h('thead', {}, h('tr', {}, th('Icon'), th('Alias'), th('Name'), th('Program'), th('Command line'), th('Folder'), th('File extensions'), edit ? th('Actions') : null)),
    tbody,
  );
  const empty = h('p', { id: 'apps-empty', class: 'muted', hidden: true });
  let listed = new Set();
  const form = edit ? applicationForm(() => pool, () => listed, (alias) => icons.forget(alias), changed) : null;
  const icons = iconLoader(() => pool, () => v.closed, tbody);
  v.el = h('section', { class: 'view' }, h('h1', {}, 'Applications'), picker, notes.el, h('div', { class: 'scroll' }, table), empty, form?.el);

  const remove = async (a) => {
    try {
      await api('DELETE', `/hostPools/${seg(pool)}/applications/${seg(a.alias)}`);
      notes.said(`${a.alias} is no longer published; the groups that listed it no longer do.`, 'ok');
    } catch (ex) {
      notes.said(ex.toString(), 'error');
    }
    changed();
  };

  v.refresh = async () => {
    const early = pool ? api('GET', `/hostPools/${seg(pool)}/applications`) : null;
    early?.catch(() => {});
    const pools = (await api('GET', '/hostPools')).value.map((p) => p.name);
    if (v.closed) return;
    if (!pool && pools.length) pool = pools[0];
    if (pool && !pools.includes(pool)) pools.unshift(pool);
    fillSelect(poolSel, pools, pool);
    if (!pool) {
      empty.hidden = false;
      setText(empty, 'No host pools yet: applications are published by a pool.');
      return;
    }
    const list = (await (early ?? api('GET', `/hostPools/${seg(pool)}/applications`))).value;
    if (v.closed) return;
    notes.refreshed();
    listed = new Set(list.map((a) => a.alias));
    form?.sync();
    empty.hidden = list.length > 0;
    setText(empty, `${pool} publishes no applications${edit ? ': publish one below.' : '.'}`);
    keyedRows(
      tbody,
      list,
      (a) => a.alias,
      (a) =>
        h(
          'tr',
          { dataset: { alias: a.alias } },
          h('td', { class: 'icon' }, placeholder(a.displayName)),
          h('th', { scope: 'row', class: 'alias' }, h('code', {}, a.alias)),
          h('td', { class: 'name' }),
          h('td', { class: 'program mono' }),
          h('td', { class: 'cmdline' }),
          h('td', { class: 'folder' }),
          h('td', { class: 'extensions' }),
          edit ? h('td', { class: 'actions' }, button('edit', 'Edit', { alias: a.alias }, () => form.load(a.alias)), ' ', deleteButton({ alias: a.alias }, () => remove(a))) : null,
        ),
      (tr, a) => {
        setText(tr.querySelector('.name'), inert(a.displayName));
        setText(tr.querySelector('.program'), inert(a.program));
        const policy = a.commandLinePolicy === 'Fixed' ? `Fixed: ${inert(a.commandLine)}` : a.commandLinePolicy === 'Any' ? 'Any arguments' : 'None';
        setText(tr.querySelector('.cmdline'), policy);
        setText(tr.querySelector('.folder'), a.folder ? inert(a.folder) : '—');
        setText(tr.querySelector('.extensions'), listText(a.fileExtensions, 64));
        icons.want(tr, a);
      },
    );
  };
  v.failed = notes.failed;
  return v;
}

/** What stands for an application's icon when it has none: its initial. */
function placeholder(name) {
  const initial = Array.from(String(name ?? '').trim())[0] || '?';
  return h('span', { class: 'app-icon placeholder', title: 'no icon', 'aria-label': 'no icon' }, inert(initial.toUpperCase()));
}

/** An application's icon (the PNG, else the ICO), or its placeholder. */
function iconOf(a) {
  const [type, data] = a.iconPng ? ['image/png', a.iconPng] : a.iconIco ? ['image/x-icon', a.iconIco] : [null, null];
  if (!data || !BASE64.test(data)) return placeholder(a.displayName);
  return h('img', { class: 'app-icon', src: `data:${type};base64,${data}`, alt: `icon of ${a.displayName}`, width: '32', height: '32' });
}

/**
 * Icons for the list, which leaves them out: each application's own GET,
 * ICON_FETCHES at a time, fetched again only when the application changed
 * (its `modifiedMs`) or this page replaced it. A row shows its
 * placeholder until its icon is in.
 */
function iconLoader(poolOf, closed, tbody) {
  const queue = [];
  const queued = new Set();
  let running = 0;
  const rowOf = (alias) => [...tbody.children].find((tr) => tr.dataset.key === alias);
  const next = async () => {
    while (queue.length && !closed()) {
      const alias = queue.shift();
      queued.delete(alias);
      const tr = rowOf(alias);
      if (!tr) continue;
      const wanted = tr.dataset.iconWanted;
      try {
        const a = await api('GET', `/hostPools/${seg(poolOf())}/applications/${seg(alias)}`);
        if (closed()) return;
        replace(tr.querySelector('.icon'), iconOf(a));
        // The version shown: a newer one in a later list is fetched then.
        tr.dataset.iconShown = String(a.modifiedMs);
      } catch {
        // Gone or refused since the list was read (the next refresh says
        // so): not asked again until the application changes.
        tr.dataset.iconShown = wanted;
      }
    }
  };
  const start = () => {
    while (running < ICON_FETCHES && queue.length) {
      running += 1;
      next().finally(() => (running -= 1));
    }
  };
  return {
    want(tr, a) {
      tr.dataset.iconWanted = String(a.modifiedMs);
      if (tr.dataset.iconShown === tr.dataset.iconWanted || queued.has(a.alias)) return;
      queued.add(a.alias);
      queue.push(a.alias);
      start();
    },
    forget(alias) {
      const tr = rowOf(alias);
      if (tr) delete tr.dataset.iconShown;
    },
  };
}

/** 89 50 4E 47: a PNG; 00 00 01 00: an ICO. */
const isIco = (b) => b.length >= 4 && b[0] === 0 && b[1] === 0 && b[2] === 1 && b[3] === 0;

/** Bytes as base64, a chunk at a time (no argument list too long). */
function base64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/**
 * An icon file as the API takes it: `iconIco` when its first bytes are an
 * ICO's, else `iconPng`, so that anything else (a GIF, a text file) is
 * judged by the broker as a PNG and refused with its message.
 */
async function readIcon(file) {
  const head = new Uint8Array(await file.slice(0, 4).arrayBuffer());
  const key = isIco(head) ? 'iconIco' : 'iconPng';
  if (file.size > MAX_ICON_FILE_BYTES) {
    throw new ApiError(400, 'InvalidParameter', `${key}: ${file.name} is ${num(file.size)} bytes; an icon is at most ${num(MAX_ICON_BYTES)} bytes`);
  }
  return { [key]: base64(new Uint8Array(await file.arrayBuffer())) };
}

/**
 * The admin's form that publishes an application of the pool in view, or
 * replaces one (PUT …/applications/{alias}: the whole application). "Edit"
 * on a row loads it here, its icon kept unless another file is chosen or
 * "Remove the icon" is ticked.
 */
function applicationForm(poolOf, listed, forget, changed) {
  const alias = h('input', { id: 'app-alias', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'notepad' });
  const name = h('input', { id: 'app-name', type: 'text', autocomplete: 'off', placeholder: 'Notepad' });
  const program = h('input', { id: 'app-program', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'C:\\Windows\\notepad.exe' });
  const policy = select('app-policy', POLICIES, 'None');
  const cmdline = h('input', { id: 'app-cmdline', type: 'text', autocomplete: 'off', spellcheck: 'false' });
  const icon = h('input', { id: 'app-icon', type: 'file', accept: '.png,.ico,image/png,image/x-icon,image/vnd.microsoft.icon' });
  const current = h('span', { id: 'app-icon-current' });
  const removeIcon = h('input', { id: 'app-icon-remove', type: 'checkbox' });
  const keep = h('p', { class: 'keep-icon', hidden: true }, 'Current icon: ', current, ' ', h('label', { for: removeIcon.id }, removeIcon, ' Remove the icon'));
  const extensions = h('input', { id: 'app-extensions', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: '.txt, .log' });
  const folder = h('input', { id: 'app-folder', type: 'text', autocomplete: 'off' });
  const out = message('app-message');
  const heading = h('h2', {}, 'Publish an application');
  const submit = h('button', { id: 'app-submit', type: 'submit' }, 'Publish');
  const reset = h('button', { id: 'app-reset', type: 'button', class: 'secondary', hidden: true }, 'New application instead');
  const el = h(
    'form',
    { id: 'app-form', class: 'card', method: 'post', novalidate: true },
    heading,
    h(
      'div',
      { class: 'fields' },
      field('Alias', alias, 'the last part of its address: letters, digits, . - _'),
      field('Display name', name),
      field('Program', program, 'a path on the host, or ||alias for one the host publishes'),
      field('Command line policy', policy),
      field('Command line', cmdline, 'Fixed policy only'),
      field('Icon', icon, `a PNG or an ICO file, at most ${MAX_ICON_BYTES / 1024} KiB`),
      field('File extensions', extensions, 'comma-separated: .txt, .log'),
      field('Folder', folder, 'empty: the top level'),
    ),
    keep,
    submit,
    ' ',
    reset,
    out,
  );
  let editing = null;
  const label = () => setText(submit, editing || listed().has(alias.value.trim()) ? 'Replace' : 'Publish');
  alias.addEventListener('input', label);
  const clear = () => {
    editing = null;
    for (const i of [alias, name, program, cmdline, extensions, folder, icon]) i.value = '';
    policy.value = 'None';
    alias.readOnly = false;
    removeIcon.checked = false;
    keep.hidden = true;
    reset.hidden = true;
    setText(heading, 'Publish an application');
    label();
  };
  reset.addEventListener('click', () => {
    clear();
    say(out, '', '');
  });

  el.addEventListener('submit', async (e) => {
    e.preventDefault();
    submit.disabled = true;
    try {
      const pool = poolOf();
      const a = alias.value.trim();
      if (!pool) throw new ApiError(400, 'InvalidParameter', 'hostPool: choose a host pool first');
      if (!a) throw new ApiError(400, 'InvalidParameter', 'alias: an application needs an alias (the last part of its address)');
      const body = {
        displayName: name.value.trim(),
        program: program.value.trim(),
        commandLinePolicy: policy.value,
        commandLine: cmdline.value.trim(),
        fileExtensions: entries(extensions.value, ','),
        folder: folder.value.trim(),
      };
      const file = icon.files[0];
      if (file) Object.assign(body, await readIcon(file));
      else if (editing && editing.alias === a && !removeIcon.checked) {
        if (editing.iconPng) body.iconPng = editing.iconPng;
        if (editing.iconIco) body.iconIco = editing.iconIco;
      }
      const replaced = listed().has(a);
      const got = await api('PUT', `/hostPools/${seg(pool)}/applications/${seg(a)}`, body);
      forget(got.alias);
      say(out, `${replaced ? 'Replaced' : 'Published'} ${inert(got.displayName)} as ${got.alias} in ${got.hostPool}${got.iconPng || got.iconIco ? ', with its icon' : ''}.`, 'ok');
      clear();
      changed();
    } catch (ex) {
      say(out, ex.toString(), 'error');
    } finally {
      submit.disabled = false;
    }
  });

  /** Loads an application into the form to replace it. */
  const load = async (a) => {
    try {
      const got = await api('GET', `/hostPools/${seg(poolOf())}/applications/${seg(a)}`);
      clear();
      editing = got;
      alias.value = got.alias;
      alias.readOnly = true;
      name.value = got.displayName;
      program.value = got.program;
      policy.value = got.commandLinePolicy;
      cmdline.value = got.commandLine;
      extensions.value = got.fileExtensions.join(', ');
      folder.value = got.folder;
      keep.hidden = !(got.iconPng || got.iconIco);
      replace(current, iconOf(got));
      reset.hidden = false;
      setText(heading, `Replace ${got.alias}`);
      label();
      say(out, '', '');
      el.scrollIntoView({ block: 'nearest' });
      name.focus();
    } catch (ex) {
      say(out, ex.toString(), 'error');
    }
  };
  return { el, load, sync: label };
}

// ---------------------------------------------------------------- application groups

/**
 * Every application group, `#/appgroups`: the list, and for the admin the
 * form that creates or replaces one (its pool, its kind, the applications
 * it gives picked from that pool's, its users and groups one per line)
 * and a delete button per row.
 */
export function groupsView(params, { edit, changed }) {
  const v = { closed: false };
  const notes = notices('groups-message');
  const tbody = h('tbody');
  const table = h(
    'table',
    { id: 'groups-table', class: 'grid' },
    h('thead', {}, h('tr', {}, th('Name'), th('Friendly name'), th('Host pool'), th('Kind'), th('Applications'), th('Users'), th('Groups'), edit ? th('Actions') : null)),
    tbody,
  );
  const empty = h('p', { id: 'groups-empty', class: 'muted', hidden: true }, `No application groups yet${edit ? ': create one below.' : '.'}`);
  const form = edit ? groupForm(params.get('pool') || '', changed) : null;
  v.el = h('section', { class: 'view' }, h('h1', {}, 'Application groups'), notes.el, h('div', { class: 'scroll' }, table), empty, form?.el);

  const remove = async (g) => {
    try {
      await api('DELETE', `/applicationGroups/${seg(g.name)}`);
      notes.said(`Deleted ${g.name}: its users are no longer given what it gave.`, 'ok');
    } catch (ex) {
      notes.said(ex.toString(), 'error');
    }
    changed();
  };

  v.refresh = async () => {
    const [groups] = await Promise.all([api('GET', '/applicationGroups'), form?.refresh()]);
    if (v.closed) return;
    notes.refreshed();
    const list = groups.value;
    empty.hidden = list.length > 0;
    keyedRows(
      tbody,
      list,
      (g) => g.name,
      (g) =>
        h(
          'tr',
          { dataset: { name: g.name } },
          h('th', { scope: 'row', class: 'group-name' }, g.name),
          h('td', { class: 'friendly' }),
          h('td', { class: 'pool' }, h('a', { href: `#/applications${query({ pool: g.hostPool })}` }, g.hostPool)),
          h('td', { class: 'kind' }),
          h('td', { class: 'apps wrap' }),
          h('td', { class: 'users wrap' }),
          h('td', { class: 'groups wrap' }),
          edit ? h('td', { class: 'actions' }, button('edit', 'Edit', { name: g.name }, () => form.load(g.name)), ' ', deleteButton({ name: g.name }, () => remove(g))) : null,
        ),
      (tr, g) => {
        setText(tr.querySelector('.friendly'), g.friendlyName ? inert(g.friendlyName) : '—');
        setText(tr.querySelector('.kind'), g.kind);
        setText(tr.querySelector('.apps'), g.kind === 'Desktop' ? 'the desktop' : listText(g.applications, 50));
        setText(tr.querySelector('.users'), listText(g.assignedUsers));
        setText(tr.querySelector('.groups'), listText(g.assignedGroups));
      },
    );
  };
  v.failed = notes.failed;
  return v;
}

/**
 * The admin's form for one application group (PUT
 * /applicationGroups/{name}: the whole group). The applications offered
 * are the chosen pool's, read again with every refresh; ticks survive it.
 */
function groupForm(firstPool, changed) {
  const name = h('input', { id: 'group-name', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'office' });
  const friendly = h('input', { id: 'group-friendly', type: 'text', autocomplete: 'off', placeholder: 'Office applications' });
  const pool = h('select', { id: 'group-pool' });
  const kind = select('group-kind', GROUP_KINDS.map((k) => [k, k]), 'RemoteApp');
  const apps = h('div', { id: 'group-apps', class: 'choices', role: 'group', 'aria-label': 'applications' });
  const appsField = h('fieldset', { class: 'field app-choices' }, h('legend', {}, 'Applications'), apps);
  const users = h('textarea', { id: 'group-users', rows: '4', spellcheck: 'false', placeholder: 'alice@contoso.com' });
  const groups = h('textarea', { id: 'group-groups', rows: '4', spellcheck: 'false', placeholder: 'Finance' });
  const out = message('group-message');
  const heading = h('h2', {}, 'Create an application group');
  const submit = h('button', { id: 'group-submit', type: 'submit' }, 'Save group');
  const reset = h('button', { id: 'group-reset', type: 'button', class: 'secondary', hidden: true }, 'New group instead');
  const el = h(
    'form',
    { id: 'group-form', class: 'card', method: 'post', novalidate: true },
    heading,
    h(
      'div',
      { class: 'fields' },
      field('Name', name),
      field('Friendly name', friendly, 'what users see'),
      field('Host pool', pool),
      field('Kind', kind, 'RemoteApp: the applications ticked; Desktop: the pool’s desktop'),
      field('Users', users, 'one per line'),
      field('Groups', groups, 'one per line'),
    ),
    appsField,
    submit,
    ' ',
    reset,
    out,
  );
  let chosen = new Set();
  let poolName = firstPool;
  let offered = null;
  const showKind = () => {
    appsField.hidden = kind.value !== 'RemoteApp';
  };
  kind.addEventListener('change', showKind);
  const offer = async () => {
    const p = poolName;
    if (!p) {
      offered = null;
      replace(apps, h('span', { class: 'muted' }, 'Create a host pool first.'));
      return;
    }
    let list;
    try {
      list = (await api('GET', `/hostPools/${seg(p)}/applications`)).value;
    } catch (ex) {
      if (p !== poolName) return;
      offered = null;
      replace(apps, h('span', { class: 'muted' }, `The applications of ${p} cannot be read: ${ex}`));
      return;
    }
    if (p !== poolName) return;
    const key = list.map((a) => `${a.alias}\n${a.displayName}`).join('\n');
    if (key === offered) return;
    offered = key;
    if (list.length === 0) {
      replace(apps, h('span', { class: 'muted' }, `${p} publishes no applications yet.`));
      return;
    }
    replace(
      apps,
      list.map((a) => {
        const box = h('input', { type: 'checkbox', class: 'group-app', id: `group-app-${a.alias}`, dataset: { alias: a.alias }, checked: chosen.has(a.alias) });
        box.addEventListener('change', () => (box.checked ? chosen.add(a.alias) : chosen.delete(a.alias)));
        return h('label', { for: box.id }, box, ' ', inert(a.displayName), ' ', h('code', {}, a.alias));
      }),
    );
  };
  pool.addEventListener('change', () => {
    poolName = pool.value;
    chosen = new Set();
    offer();
  });
  const clear = () => {
    for (const i of [name, friendly, users, groups]) i.value = '';
    name.readOnly = false;
    kind.value = 'RemoteApp';
    chosen = new Set();
    for (const b of apps.querySelectorAll('input.group-app')) b.checked = false;
    reset.hidden = true;
    setText(heading, 'Create an application group');
    showKind();
  };
  reset.addEventListener('click', () => {
    clear();
    say(out, '', '');
  });

  el.addEventListener('submit', async (e) => {
    e.preventDefault();
    submit.disabled = true;
    try {
      const n = name.value.trim();
      if (!n) throw new ApiError(400, 'InvalidParameter', 'name: an application group needs a name');
      const body = {
        hostPool: pool.value,
        kind: kind.value,
        friendlyName: friendly.value.trim(),
        applications: kind.value === 'RemoteApp' ? [...apps.querySelectorAll('input.group-app:checked')].map((b) => b.dataset.alias) : [],
        assignedUsers: entries(users.value, '\n'),
        assignedGroups: entries(groups.value, '\n'),
      };
      const g = await api('PUT', `/applicationGroups/${seg(n)}`, body);
      const gives = g.kind === 'Desktop' ? `the desktop of ${g.hostPool}` : `${g.applications.length} application${g.applications.length === 1 ? '' : 's'} of ${g.hostPool}`;
      say(out, `Saved ${g.name}: it gives ${gives} to ${g.assignedUsers.length} user(s) and ${g.assignedGroups.length} group(s).`, 'ok');
      clear();
      changed();
    } catch (ex) {
      say(out, ex.toString(), 'error');
    } finally {
      submit.disabled = false;
    }
  });

  /** Loads a group into the form to replace it. */
  const load = async (n) => {
    try {
      const g = await api('GET', `/applicationGroups/${seg(n)}`);
      clear();
      name.value = g.name;
      name.readOnly = true;
      friendly.value = g.friendlyName;
      kind.value = g.kind;
      users.value = g.assignedUsers.join('\n');
      groups.value = g.assignedGroups.join('\n');
      if (![...pool.options].some((o) => o.value === g.hostPool)) pool.append(h('option', { value: g.hostPool }, g.hostPool));
      pool.value = g.hostPool;
      poolName = g.hostPool;
      chosen = new Set(g.applications);
      offered = null;
      await offer();
      reset.hidden = false;
      setText(heading, `Replace ${g.name}`);
      showKind();
      say(out, '', '');
      el.scrollIntoView({ block: 'nearest' });
    } catch (ex) {
      say(out, ex.toString(), 'error');
    }
  };

  /** With every refresh: the pools to choose from, and the chosen one's applications. */
  const refresh = async () => {
    const pools = (await api('GET', '/hostPools')).value.map((p) => p.name);
    if (!poolName && pools.length) poolName = pools[0];
    if (poolName && !pools.includes(poolName)) pools.unshift(poolName);
    fillSelect(pool, pools, poolName);
    await offer();
  };
  showKind();
  return { el, load, refresh };
}
