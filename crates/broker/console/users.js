// users.js — the console's Users view: a user as the organisation's
// directory sees them (rule AD1), for anyone who may read. Type a name
// (`name`, `name@suffix` or `DOMAIN\name`) and see whether the directory
// knows them, their entry, their groups (nested ones included: exactly the
// groups that decide which pools they may use) and how old that answer is.
//
// It reads GET /api/v1/users/{name}, refreshed like every view (app.js):
// each refresh takes the broker's cached answer, so watching the page asks
// the directory no more often than the broker would anyway; "Read again"
// asks with ?refresh=true, which reads the directory at once.

import { ApiError, api, query, seg } from './api.js';
import { field, h, inert, message, replace, say, setText } from './dom.js';

/** What the broker's refusals of a look-up mean, in the operator's words. */
function refusalText(e) {
  if (e instanceof ApiError && e.status === 404 && e.code === 'NotFound') {
    return `No directory is configured on this broker (serve --directory-url): it keeps no groups of its own, so a user's groups are the ones the portal's sign-in or the caller vouches for. (${e})`;
  }
  if (e instanceof ApiError && e.status === 503) {
    return `The directory cannot be reached, so this user's groups cannot be read now. Decisions that need a group are refused until it is back; users entitled by name and users going back to their session are not affected. (${e})`;
  }
  return e instanceof ApiError ? e.toString() : e.message;
}

/** "read just now", "read 42 s ago" for an answer `seconds` old. */
function ageText(seconds) {
  if (seconds === null || seconds === undefined) return 'read just now (not kept: the cache is full)';
  if (seconds === 0) return 'read from the directory just now';
  if (seconds < 90) return `read from the directory ${seconds} s ago`;
  if (seconds < 90 * 60) return `read from the directory ${Math.round(seconds / 60)} min ago`;
  return `read from the directory ${Math.round(seconds / 3600)} h ago`;
}

/** The Users view: `#/users?name=…`. */
export function usersView(params) {
  const v = { closed: false };
  const name = (params.get('name') || '').trim();
  const input = h('input', { id: 'user-name', type: 'search', value: name, autocomplete: 'off', spellcheck: 'false', placeholder: 'alice@contoso.com' });
  const lookup = h(
    'form',
    { id: 'user-lookup', class: 'card inline', method: 'post', novalidate: true },
    field('User', input, 'name, name@suffix or DOMAIN\\name, any case'),
    h('button', { type: 'submit' }, 'Look up'),
  );
  lookup.addEventListener('submit', (e) => {
    e.preventDefault();
    location.hash = `#/users${query({ name: input.value.trim() })}`;
  });

  const errorEl = message('user-error');
  const intro = h(
    'p',
    { id: 'user-intro', class: 'muted', hidden: Boolean(name) },
    'Type a user’s name to see the groups the broker reads for them from the directory, nested ones included: the groups that decide which host pools they may use.',
  );
  const heading = h('h2', { id: 'user-heading' });
  const found = h('p', { id: 'user-found' });
  const dn = h('dd', { id: 'user-dn', class: 'mono' });
  const age = h('dd', { id: 'user-age' });
  const count = h('p', { id: 'user-group-count', class: 'muted' });
  const groups = h('ul', { id: 'user-groups', class: 'groups' });
  const again = h('button', { id: 'user-refresh', type: 'button', class: 'secondary' }, 'Read again');
  const result = h(
    'section',
    { id: 'user-result', class: 'card', hidden: true },
    heading,
    found,
    h('dl', { class: 'facts' }, h('dt', {}, 'Distinguished name'), dn, h('dt', {}, 'Answer'), age),
    h('h3', {}, 'Groups'),
    count,
    groups,
    again,
  );
  v.el = h('section', { class: 'view' }, h('h1', {}, 'Users'), lookup, intro, errorEl, result);

  // Answers are shown in the order they were asked for: a refresh that set
  // out before "Read again" must not put the older answer back.
  let asked = 0;
  let shown = 0;
  const look = async (refresh) => {
    const mine = ++asked;
    const u = await api('GET', `/users/${seg(name)}${query({ refresh: refresh ? 'true' : '' })}`);
    if (v.closed || mine < shown) return false;
    shown = mine;
    render(u);
    return true;
  };

  const render = (u) => {
    // An answer ends the error it replaces; "Read again"'s note stays.
    if (errorEl.classList.contains('error')) say(errorEl, '', '');
    result.hidden = false;
    result.dataset.found = String(u.found);
    setText(heading, inert(u.name));
    setText(
      found,
      u.found
        ? 'Known to the directory.'
        : 'Not found: the directory has no user by this name, so they belong to no group (pools that name them, or name no one, still let them in).',
    );
    found.className = u.found ? 'found' : 'not-found';
    setText(dn, u.distinguishedName ? inert(u.distinguishedName) : '—');
    setText(age, `${ageText(u.cachedSeconds)}; answers are kept ${u.cacheSeconds} s, then read again`);
    age.dataset.seconds = u.cachedSeconds === null || u.cachedSeconds === undefined ? '' : String(u.cachedSeconds);
    setText(count, u.groups.length === 0 ? 'No groups.' : `${u.groups.length} group${u.groups.length === 1 ? '' : 's'}, nested ones included.`);
    const same = u.groups.length === groups.children.length && u.groups.every((g, i) => groups.children[i].dataset.group === g);
    if (!same) replace(groups, u.groups.map((g) => h('li', { dataset: { group: g } }, inert(g))));
  };

  again.addEventListener('click', async () => {
    again.disabled = true;
    try {
      if (await look(true)) say(errorEl, `Read ${name} from the directory again at ${new Date().toLocaleTimeString('en-GB')}.`, 'ok');
    } catch (ex) {
      v.failed(ex);
    } finally {
      again.disabled = false;
    }
  });

  v.refresh = async () => {
    if (!name) return;
    await look(false);
  };
  v.failed = (e) => {
    // An answer that can no longer be read is not left on screen as if it
    // were current.
    result.hidden = true;
    say(errorEl, refusalText(e), 'error');
  };
  return v;
}
