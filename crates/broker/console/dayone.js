// dayone.js — what an administrator needs on a pool's first day, shown
// below its hosts: a registration token with the agent's configuration
// that uses it, a host added by hand, and a user's .rdp file or browser
// link. Every refusal is the API's own, shown as it says it.

import { api, apiText, ApiError, query, seg } from './api.js';
import { CONFIRM_MS, field, h, message, numberOrText, replace, say, setText } from './dom.js';

/**
 * What an administrator needs on a pool's first day, below its hosts:
 * enroll agents with a registration token, add a host by hand, and give a
 * user an `.rdp` file or a browser link. `poolNow` answers the pool as last
 * read (null before the first refresh); `changed` is called when a host
 * was added, so the page refreshes at once.
 */
export function dayOneTools(pool, poolNow, changed) {
  return h(
    'section',
    { id: 'day-one', class: 'day-one' },
    h('h2', {}, 'Add session hosts'),
    h('div', { class: 'cards' }, registrationCard(pool), addHostCard(pool, changed)),
    h('h2', {}, 'Connect a user'),
    userLinkCard(pool, poolNow),
  );
}

/** A word as a POSIX shell reads it: quoted when it needs to be. */
function shellWord(s) {
  return /^[A-Za-z0-9._:/@%+=,-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
}

/** A TOML basic string (JSON's escapes are TOML's for these). */
const tomlString = (s) => JSON.stringify(s);

/**
 * Registration tokens of the pool (POST and DELETE …/registrationToken).
 * The broker keeps only a token's hash and answers it once; the page shows
 * it once too: in this card only, never in the URL, the history, any
 * storage or the browser's log, and gone with "Hide the token", a new
 * token, or leaving the page. Beside it, the agent's configuration that
 * uses it.
 */
function registrationCard(pool) {
  const hours = h('input', { id: 'reg-hours', type: 'text', inputmode: 'numeric', value: '24', autocomplete: 'off' });
  const maxHosts = h('input', { id: 'reg-max-hosts', type: 'text', inputmode: 'numeric', value: '1', autocomplete: 'off' });
  const out = message('reg-message');
  const shown = h('div', { id: 'reg-token-out', class: 'secret', hidden: true });
  const create = h('button', { type: 'submit' }, 'Create registration token');
  const revoke = h('button', { type: 'button', id: 'reg-revoke', class: 'secondary' }, 'Revoke all tokens');
  const form = h(
    'form',
    { id: 'reg-token', class: 'card', method: 'post', novalidate: true },
    h('h3', {}, 'Enroll hosts with the agent'),
    h('p', { class: 'muted' }, 'A registration token lets a session host’s agent register it in this pool. It is shown once.'),
    h('div', { class: 'fields' }, field('Valid for (hours)', hours, 'empty: 24 h'), field('New hosts it may register', maxHosts, 'empty: 1')),
    create,
    ' ',
    revoke,
    out,
    shown,
  );
  const hide = () => {
    replace(shown);
    shown.hidden = true;
  };
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    hide();
    const body = {};
    const hrs = numberOrText(hours.value);
    if (hrs !== '') body.expiresInSeconds = typeof hrs === 'number' ? hrs * 3600 : hrs;
    const n = numberOrText(maxHosts.value);
    if (n !== '') body.maxHosts = n;
    create.disabled = true;
    try {
      const t = await api('POST', `/hostPools/${seg(pool)}/registrationToken`, body);
      const broker = location.origin;
      const tokenFile = `/etc/deskbroker/${pool}.token`;
      const hideButton = h('button', { type: 'button', id: 'reg-hide', class: 'secondary' }, 'Hide the token');
      hideButton.addEventListener('click', () => {
        hide();
        say(out, 'The token is hidden; it still works until it expires or is revoked.', 'info');
      });
      replace(
        shown,
        h('p', {}, 'Token (copy it now; it is not shown again): ', h('code', { id: 'reg-token-value', class: 'token' }, t.token)),
        h('p', {}, 'On the session host, in ', h('code', {}, '/etc/deskbroker/agent.toml'), ' (mode 0600, it holds the token), then ', h('code', {}, 'systemctl enable --now deskbroker-agent'), ' or ', h('code', {}, 'deskbroker agent'), ':'),
        h('pre', { id: 'reg-agent-config' }, `broker = ${tomlString(broker)}\nhost_pool = ${tomlString(pool)}\nregistration_token = ${tomlString(t.token)}\n`),
        h('p', {}, 'Or with the token alone on the first line of ', h('code', {}, tokenFile), ' (mode 0600), which keeps it out of the process list:'),
        h('pre', { id: 'reg-agent-command' }, `deskbroker agent --broker ${shellWord(broker)} --host-pool ${shellWord(pool)} --registration-token-file ${shellWord(tokenFile)}`),
        h('p', { class: 'muted' }, `The broker’s address is the one this browser uses: give the one the host reaches. A host on the broker’s own machine (a loopback address) needs the pool’s allowedAddressRanges to name 127.0.0.0/8.`),
        hideButton,
      );
      shown.hidden = false;
      say(out, `Created a registration token for ${t.maxHosts} new host${t.maxHosts === 1 ? '' : 's'}, valid until ${t.expirationTime}.`, 'ok');
    } catch (ex) {
      say(out, ex.toString(), 'error');
    } finally {
      create.disabled = false;
    }
  });
  let armed = null;
  revoke.addEventListener('click', async () => {
    if (!armed) {
      setText(revoke, 'Confirm revoke');
      revoke.classList.add('armed');
      armed = setTimeout(() => {
        armed = null;
        setText(revoke, 'Revoke all tokens');
        revoke.classList.remove('armed');
      }, CONFIRM_MS);
      return;
    }
    clearTimeout(armed);
    armed = null;
    setText(revoke, 'Revoke all tokens');
    revoke.classList.remove('armed');
    revoke.disabled = true;
    try {
      await api('DELETE', `/hostPools/${seg(pool)}/registrationToken`);
      hide();
      say(out, 'Revoked every registration token of this pool; hosts already registered keep working.', 'ok');
    } catch (ex) {
      say(out, ex.toString(), 'error');
    } finally {
      revoke.disabled = false;
    }
  });
  return form;
}

/**
 * A session host added by hand (PUT …/sessionHosts/{host} with
 * If-None-Match: *, so that an existing host is refused, not replaced);
 * the API's refusal (a name, an address the pool's policy refuses) is
 * shown as it says it.
 */
function addHostCard(pool, changed) {
  const name = h('input', { id: 'add-host-name', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'h1' });
  const address = h('input', { id: 'add-host-address', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: '10.0.0.5:3389' });
  const mac = h('input', { id: 'add-host-mac', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'aa:bb:cc:dd:ee:ff' });
  const out = message('add-host-message');
  const add = h('button', { type: 'submit' }, 'Add session host');
  const form = h(
    'form',
    { id: 'add-host', class: 'card', method: 'post', novalidate: true },
    h('h3', {}, 'Add a session host by hand'),
    h('p', { class: 'muted' }, 'For a host without an agent: it is Unavailable until heartbeats come for it (an agent, or a watching agent for Windows hosts).'),
    h('div', { class: 'fields' }, field('Name', name), field('Address (HOST:PORT)', address, 'where RDP clients reach it'), field('MAC address', mac, 'optional, for Wake-on-LAN')),
    add,
    out,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const n = name.value.trim();
    const body = { address: address.value.trim() };
    if (mac.value.trim()) body.macAddress = mac.value.trim();
    add.disabled = true;
    try {
      if (!n) throw new ApiError(400, 'InvalidParameter', 'name: a session host needs a name');
      const x = await api('PUT', `/hostPools/${seg(pool)}/sessionHosts/${seg(n)}`, body, undefined, { 'If-None-Match': '*' });
      say(out, `Added session host ${x.name} (${x.address}): ${x.status}.`, 'ok');
      name.value = '';
      address.value = '';
      mac.value = '';
      changed();
    } catch (ex) {
      say(out, ex.toString(), 'error');
    } finally {
      add.disabled = false;
    }
  });
  return form;
}

/**
 * A user's `.rdp` file (GET …/rdpFile?user=, a download) and browser link
 * (GET …/webUrl?user=, the RD Gateway's page), each with a fresh connection
 * ticket for that user: kept in no storage, put in no URL of this page.
 * The user's name is the administrator's text and the link the broker's:
 * both are shown as text, the link only when it is http(s).
 */
function userLinkCard(pool, poolNow) {
  const user = h('input', { id: 'link-user', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'alice@contoso.com' });
  const groups = h('input', { id: 'link-groups', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'Sales,Support' });
  const viaGateway = h('input', { id: 'link-gateway', type: 'checkbox' });
  const rdp = h('button', { type: 'submit', id: 'link-rdp' }, 'Download .rdp file');
  const web = h('button', { type: 'button', id: 'link-web', class: 'secondary' }, 'Browser link');
  const out = message('link-message');
  const result = h('div', { id: 'link-out', hidden: true });
  const form = h(
    'form',
    { id: 'user-link', class: 'card', method: 'post', novalidate: true },
    h('p', { class: 'muted' }, 'A file or a link that takes one user to a desktop of this pool, with a connection ticket for them.'),
    h(
      'div',
      { class: 'fields' },
      field('User', user, 'the name the user logs on with'),
      field('Groups', groups, 'optional: the user’s groups, for the pool’s entitledGroups'),
      h('div', { class: 'field' }, h('label', { for: viaGateway.id }, viaGateway, ' Through the RD Gateway'), h('small', { class: 'muted' }, 'the .rdp file only')),
    ),
    rdp,
    ' ',
    web,
    out,
    result,
  );
  const asked = () => {
    const u = user.value.trim();
    if (!u) throw new ApiError(400, 'InvalidParameter', 'user: type the user’s name first');
    return { user: u, groups: groups.value.trim() };
  };
  const lifetime = () => {
    const p = poolNow();
    return p && p.ticketLifetimeSeconds ? `${p.ticketLifetimeSeconds} s` : 'a few minutes';
  };
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    replace(result);
    result.hidden = true;
    rdp.disabled = true;
    try {
      const q = asked();
      const text = await apiText('GET', `/hostPools/${seg(pool)}/rdpFile${query({ ...q, gateway: viaGateway.checked ? 'true' : '' })}`);
      const url = URL.createObjectURL(new Blob([text], { type: 'application/x-rdp' }));
      const a = h('a', { href: url, download: `${pool}.rdp`, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      // Revoked once the browser has had time to take the download.
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      say(out, `Downloaded ${pool}.rdp for ${q.user}: its ticket admits them for ${lifetime()} (the pool’s ticketLifetimeSeconds), so it must be opened before then.`, 'ok');
    } catch (ex) {
      say(out, ex.toString(), 'error');
    } finally {
      rdp.disabled = false;
    }
  });
  web.addEventListener('click', async () => {
    replace(result);
    result.hidden = true;
    web.disabled = true;
    try {
      const q = asked();
      const w = await api('GET', `/hostPools/${seg(pool)}/webUrl${query(q)}`);
      let link;
      try {
        link = new URL(w.url);
      } catch {
        link = null;
      }
      if (!link || (link.protocol !== 'https:' && link.protocol !== 'http:')) {
        throw new ApiError(0, null, `the broker answered an address that is not a web page: ${w.url}`);
      }
      const copy = h('input', { id: 'web-url-text', type: 'text', readonly: true, value: link.href, autocomplete: 'off', spellcheck: 'false' });
      replace(
        result,
        field(`Browser link for ${q.user}, valid until ${w.expirationTime}`, copy),
        h('a', { id: 'web-url', href: link.href, target: '_blank', rel: 'noopener noreferrer' }, 'Open in a new tab'),
      );
      result.hidden = false;
      say(out, `A browser link for ${q.user}: give it to them only (it admits them, until ${w.expirationTime}).`, 'ok');
    } catch (ex) {
      say(out, ex.toString(), 'error');
    } finally {
      web.disabled = false;
    }
  });
  return form;
}
