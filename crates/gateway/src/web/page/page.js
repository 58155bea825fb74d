// The desktop in a tab: reads the connection ticket from the address's
// fragment (which browsers never send to the server), hands deskbroker's
// WebAssembly RDP client to the iron-remote-desktop web component, and
// connects through this origin's /web/rdp.
import init, * as backend from "/web/webclient.js";
import "/web/iron-remote-desktop.js";

const status = document.getElementById("status");
const panel = document.getElementById("panel");
const reconnect = document.getElementById("reconnect");
const form = document.getElementById("credentials");

function show(state, text, canRetry) {
  status.dataset.state = state;
  status.textContent = text;
  reconnect.hidden = !canRetry;
  form.hidden = true;
  panel.hidden = false;
}

// Hosts that require Network Level Authentication take the user's
// credentials before any session: the page asks for them, keeps them in
// memory for this tab only (a reconnect uses them again), and the client
// hands them to the host through CredSSP.
let credentials = null;

function askCredentials(state, text) {
  show(state, text, false);
  form.hidden = false;
  const user = document.getElementById("user");
  (user.value ? document.getElementById("password") : user).focus();
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const password = document.getElementById("password");
  credentials = {
    user: document.getElementById("user").value,
    password: password.value,
    domain: document.getElementById("domain").value,
  };
  password.value = "";
  connect();
});

// A new link opened in this tab (only its fragment differs): start over
// with its ticket.
window.addEventListener("hashchange", () => { location.reload(); });

// The ticket leaves the address bar (and the history) at once.
const ticket = new URLSearchParams(location.hash.slice(1)).get("ticket");
history.replaceState(null, "", location.pathname);

// What a refusal means to the user, from the gateway's HTTP status.
function refusal(error) {
  let details;
  try { details = error.rdcleanpathDetails(); } catch { details = undefined; }
  const http = details ? details.httpStatusCode : undefined;
  switch (http) {
    case 401:
    case 403:
      return ["refused", "The link was refused: it is changed, expired, or for another desktop. Ask for a new link where you got this one."];
    case 429:
      return ["busy", "Too many connections from here just now. Wait a minute and reconnect."];
    case 502:
      return ["unreachable", "The desktop's host cannot be reached. Reconnect to try again."];
    case 503:
      return ["unavailable", "No desktop is available in this pool just now. Reconnect to try again."];
    default:
      if (http) return ["refused", `The connection was refused (HTTP ${http}).`];
      return ["failed", "The connection failed: " + (typeof error.backtrace === "function" ? error.backtrace() : String(error))];
  }
}

let ui;

async function connect() {
  if (!ticket) {
    show("no-ticket", "This address has no connection ticket. Open the desktop with the link you were given, or ask for a new one.", false);
    return;
  }
  show("connecting", "Connecting…", false);
  const proxy = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/web/rdp";
  let builder = ui.configBuilder()
    .withDestination("desktop")
    .withProxyAddress(proxy)
    .withAuthToken(ticket)
    .withDesktopSize({ width: window.innerWidth, height: window.innerHeight });
  if (credentials) {
    builder = builder
      .withUsername(credentials.user)
      .withPassword(credentials.password)
      .withServerDomain(credentials.domain);
  }
  let session;
  try {
    session = await ui.connect(builder.build());
  } catch (error) {
    if (typeof error.credentialsRequired === "function" && error.credentialsRequired()) {
      askCredentials("credentials", "This desktop asks for your user name and password before it opens.");
      return;
    }
    if (typeof error.kind === "function" && error.kind() === backend.IronErrorKind.LogonFailure) {
      credentials = null;
      askCredentials("credentials-refused", "The desktop refused the user name or password. Try again.");
      return;
    }
    const [state, text] = refusal(error);
    show(state, text, state !== "refused");
    return;
  }
  panel.hidden = true;
  status.dataset.state = "connected";
  ui.setVisibility(true);
  try {
    const end = await session.run();
    show("ended", "The session ended: " + end.reason(), true);
  } catch (error) {
    show("ended", "The session ended: " + (typeof error.backtrace === "function" ? error.backtrace() : String(error)), true);
  }
}

reconnect.addEventListener("click", () => { connect(); });

// A resized tab asks the host for a desktop of the tab's size, once the
// resizing has settled (a drag fires many events). Until the host answers
// (and on hosts that cannot resize) the desktop is scaled to fit.
let resizing;
window.addEventListener("resize", () => {
  clearTimeout(resizing);
  resizing = setTimeout(() => {
    if (!ui || status.dataset.state !== "connected") return;
    ui.resize(window.innerWidth, window.innerHeight);
    ui.setScale("fit");
  }, 300);
});
// Leaving the page ends the connection at once (the session is then
// Disconnected, and can be taken up again from another tab).
window.addEventListener("pagehide", () => { if (ui) ui.shutdown(); });

await init({ module_or_path: "/web/webclient_bg.wasm" });
const element = document.createElement("iron-remote-desktop");
element.module = backend;
element.setAttribute("scale", "fit");
element.setAttribute("flexcenter", "true");
element.addEventListener("ready", (event) => {
  ui = event.detail.irgUserInteraction;
  ui.setEnableClipboard(false);
  connect();
});
document.getElementById("screen").appendChild(element);
