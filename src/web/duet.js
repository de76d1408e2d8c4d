// The page's script. The home page enters or creates a room. The room page
// renders the room's live feed (GET /api/rooms/{id}/live, a WebSocket) and
// sends messages and commands through the plain HTTP routes. In token mode
// the token comes from an invite link (`#token=…`, taken off the address
// bar at once) or is asked for when the worker refuses the page (once per
// tab, again when it is wrong, or with the "API token" button); it is kept
// for the tab and sent as a bearer header and, for the socket, as a
// subprotocol. The feed's hello says the page's role: a watcher gets no
// boxes to type in, an owner the buttons that make and revoke invite links.
"use strict";
if (document.body.dataset.page === "home") home();
else room();

function home() {
  const form = document.getElementById("enter"), field = document.getElementById("room");
  form.addEventListener("submit", (e) => { e.preventDefault(); location.href = "/rooms/" + encodeURIComponent(field.value.trim()); });
  document.getElementById("new").addEventListener("click", () => { location.href = "/rooms/" + crypto.randomUUID(); });
}

function room() {
  const room = decodeURIComponent(location.pathname.split("/").pop());
  const feedPath = `/api/rooms/${encodeURIComponent(room)}/live`;
  const $ = (id) => document.getElementById(id);
  const chat = $("chat"), term = $("term"), status = $("status"), tokenButton = $("token");
  // An invite link's token rides in the fragment, which no server sees;
  // it is kept for the tab and taken off the address bar.
  const invited = new URLSearchParams(location.hash.slice(1)).get("token");
  if (invited) {
    sessionStorage.setItem("duet-token", invited);
    history.replaceState(null, "", location.pathname + location.search);
  }
  let token = sessionStorage.getItem("duet-token") || "";
  // The socket of the moment and how far it has shown and acknowledged its
  // events: every socket numbers its own from 1, so these start afresh with it.
  let feed = null, retry = 500;
  $("room-id").textContent = room;
  $("name").value = localStorage.getItem("duet-name") || "";
  tokenButton.hidden = !token;

  function say(text, bad) {
    status.textContent = text;
    status.classList.toggle("bad", Boolean(bad));
  }
  function scrolled(log, add) {
    const atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    add();
    if (atEnd) log.scrollTop = log.scrollHeight;
  }
  function message(m) {
    scrolled(chat, () => {
      const div = document.createElement("div");
      div.className = `msg ${m.role}`;
      const who = document.createElement("span");
      who.className = "who";
      who.textContent = m.role === "agent" ? "agent: " : `${m.userId || "someone"}: `;
      div.append(who, document.createTextNode(m.text));
      chat.append(div);
    });
  }
  function line(text, cls) {
    const span = document.createElement("span");
    if (cls) span.className = cls;
    span.textContent = text;
    return span;
  }
  // What the feed says this page may do.
  function hello(e) {
    $("role").textContent = `you: ${e.role}`;
    $("say").hidden = $("run").hidden = e.role === "watcher";
    $("invite").hidden = !e.invites;
    if (e.name) $("name").value = e.name;
    $("name").readOnly = Boolean(e.name);
    chat.textContent = "";
    e.history.forEach(message);
  }
  function presence(watchers) {
    $("present").replaceChildren(...watchers.map((w) => {
      const li = document.createElement("li");
      li.textContent = `${w.name || "someone"} (${w.role})`;
      return li;
    }));
  }
  // Tells the feed the name this page shows by (a watcher's is its invite's).
  function sendName(f = feed) {
    const name = $("name").value.trim();
    if (name && !$("say").hidden && !$("name").readOnly && f?.ws.readyState === WebSocket.OPEN) f.ws.send(JSON.stringify({ type: "name", name }));
  }
  const ENDS = { deleted: "the room was deleted", expired: "the room expired", revoked: "your link was revoked", token_expired: "your link expired" };
  function onEvent(e) {
    switch (e.type) {
      case "hello": hello(e); sendName(); break;
      case "presence": presence(e.watchers); break;
      case "message": message(e.message); break;
      case "command": scrolled(term, () => term.append(line(`$ ${e.cmd}\n`, "cmd"))); break;
      case "output": scrolled(term, () => term.append(line(e.data, e.stream === "stderr" ? "err" : ""))); break;
      case "command_end": scrolled(term, () => term.append(line(`[exit ${e.exitCode}${e.timedOut ? ", timed out" : ""}${e.truncated ? ", output cut" : ""}]\n`, "end"))); break;
      case "failed": scrolled(chat, () => chat.append(line(`(${e.error})\n`, "muted"))); break;
      case "closed": {
        const what = ENDS[e.reason] ?? e.reason;
        if (e.reason === "deleted" || e.reason === "expired") {
          scrolled(chat, () => chat.append(line(`(${what}: its history and files are gone)\n`, "muted")));
          say(`${what}; reload the page to start it afresh`, true);
        } else say(`${what}; ask the room's owner for a new one`, true);
        break;
      }
    }
  }
  function authProtocols() {
    const b64 = btoa(unescape(encodeURIComponent(token))).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
    return token ? ["duet.v1", `duet.auth.${b64}`] : ["duet.v1"];
  }
  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}${feedPath}`, authProtocols());
    const mine = (feed = { ws, seen: 0, acked: 0, opened: false, closed: false });
    ws.onopen = () => { mine.opened = true; say("live"); retry = 500; };
    ws.onmessage = (msg) => {
      if (feed !== mine) return; // replaced: its last words are not this page's
      const e = JSON.parse(msg.data);
      onEvent(e);
      mine.closed ||= e.type === "closed";
      mine.seen = e.seq ?? mine.seen;
      if (mine.seen - mine.acked >= 16) ack(mine);
    };
    ws.onclose = () => {
      if (feed !== mine || mine.closed) return; // replaced, or the room is gone
      if (mine.opened) reconnect();
      else refused();
    };
  }
  function reconnect() {
    say("disconnected; reconnecting…", true);
    setTimeout(connect, (retry = Math.min(retry * 2, 10000)));
  }
  // A browser reports a refused upgrade only as code 1006. The feed's URL
  // asked over plain HTTP passes the same checks: a 401 means the token is
  // missing or wrong; anything else (426, not a WebSocket: the checks
  // passed) means the socket failed for another reason, worth retrying.
  async function refused() {
    const headers = token ? { authorization: `Bearer ${token}` } : {};
    const res = await fetch(feedPath, { headers }).catch(() => null);
    if (res?.status !== 401) return reconnect();
    if (askToken()) return connect();
    say("not allowed: wrong or missing token", true);
  }
  // Acknowledges what was shown, so the room can tell a slow watcher.
  function ack(f) {
    if (f.ws.readyState !== WebSocket.OPEN) return;
    f.ws.send(JSON.stringify({ type: "ack", seq: f.seen }));
    f.acked = f.seen;
  }
  setInterval(() => { if (feed && feed.seen > feed.acked) ack(feed); }, 250);
  // Asks for the token after a 401: for the first time, or for a new one.
  function askToken(question = token ? "The API token was refused. Enter the right one:" : "This Duet needs its API token:") {
    const given = prompt(question);
    tokenButton.hidden = false;
    if (!given?.trim()) return false;
    token = given.trim();
    sessionStorage.setItem("duet-token", token);
    return true;
  }
  // Replaces the token: the socket starts again with the new one.
  tokenButton.addEventListener("click", () => {
    if (!askToken("API token:")) return;
    const old = feed;
    connect();
    old?.ws.close();
  });
  async function post(path, body, method = "POST") {
    const headers = body ? { "content-type": "application/json" } : {};
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await fetch(`/api/rooms/${encodeURIComponent(room)}/${path}`, { method, headers, body: body && JSON.stringify(body) });
    if (res.status === 401 && askToken()) return post(path, body, method);
    const json = await res.json().catch(() => ({}));
    if (json.error) say(json.error, true);
    return json;
  }
  $("name").addEventListener("change", () => sendName());
  $("say").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("text").value.trim(), userId = $("name").value.trim();
    if (!text) return;
    localStorage.setItem("duet-name", userId);
    sendName();
    $("text").value = "";
    post("message", userId ? { text, userId } : { text });
  });
  $("run").addEventListener("submit", (e) => {
    e.preventDefault();
    const cmd = $("cmd").value;
    if (!cmd.trim()) return;
    $("cmd").value = "";
    post("sandbox/exec", { cmd });
  });
  // An owner's invite links: made, shown to copy, and all revoked at once.
  $("invite").addEventListener("submit", async (e) => {
    e.preventDefault();
    const name = $("guest").value.trim();
    const json = await post("invites", name ? { role: e.submitter.value, name } : { role: e.submitter.value });
    if (!json.link) return;
    $("link").hidden = false;
    $("link").value = json.link;
    $("link").select();
    say(`a ${json.role} link, valid until ${new Date(json.expiresAt).toLocaleString()}`);
  });
  $("revoke").addEventListener("click", async () => {
    const json = await post("invites", undefined, "DELETE");
    if (!json.revoked) return;
    $("link").hidden = true;
    say("every invite link was revoked");
    // Revoking ended this page's own token too: it goes on with the new one.
    if (!json.invite) return;
    token = json.invite.token;
    sessionStorage.setItem("duet-token", token);
    const old = feed;
    connect();
    old?.ws.close();
  });
  connect();
}
