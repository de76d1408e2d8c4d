// The page's script. The home page enters or creates a room. The room page
// renders the room's live feed (GET /api/rooms/{id}/live, a WebSocket) and
// sends messages and commands through the plain HTTP routes. With
// DUET_API_TOKEN set, the token is asked for when the worker refuses the
// page (once per tab, again when it is wrong, or with the "API token"
// button) and sent as a bearer header and, for the socket, as a subprotocol.
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
  function onEvent(e) {
    switch (e.type) {
      case "hello": chat.textContent = ""; e.history.forEach(message); break;
      case "message": message(e.message); break;
      case "command": scrolled(term, () => term.append(line(`$ ${e.cmd}\n`, "cmd"))); break;
      case "output": scrolled(term, () => term.append(line(e.data, e.stream === "stderr" ? "err" : ""))); break;
      case "command_end": scrolled(term, () => term.append(line(`[exit ${e.exitCode}${e.timedOut ? ", timed out" : ""}${e.truncated ? ", output cut" : ""}]\n`, "end"))); break;
      case "failed": scrolled(chat, () => chat.append(line(`(${e.error})\n`, "muted"))); break;
      case "closed": {
        const what = e.reason === "deleted" ? "was deleted" : "expired";
        scrolled(chat, () => chat.append(line(`(the room ${what}: its history and files are gone)\n`, "muted")));
        say(`the room ${what}; reload the page to start it afresh`, true);
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
  async function post(path, body) {
    const headers = { "content-type": "application/json" };
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await fetch(`/api/rooms/${encodeURIComponent(room)}/${path}`, { method: "POST", headers, body: JSON.stringify(body) });
    if (res.status === 401 && askToken()) return post(path, body);
    const json = await res.json().catch(() => ({}));
    if (json.error) say(json.error, true);
    return json;
  }
  $("say").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("text").value.trim(), userId = $("name").value.trim();
    if (!text) return;
    localStorage.setItem("duet-name", userId);
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
  connect();
}
