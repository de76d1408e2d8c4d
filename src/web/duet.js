// The page's script. The home page enters or creates a room. The room page
// renders the room's live feed (GET /api/rooms/{id}/live, a WebSocket) and
// sends messages and commands through the plain HTTP routes. With
// DUET_API_TOKEN set, the token is asked for once per tab and sent as a
// bearer header and, for the socket, as a subprotocol.
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
  const $ = (id) => document.getElementById(id);
  const chat = $("chat"), term = $("term"), status = $("status");
  const commands = new Map();
  let token = sessionStorage.getItem("duet-token") || "";
  let socket = null, seen = 0, acked = 0, retry = 500;
  $("room-id").textContent = room;
  $("name").value = localStorage.getItem("duet-name") || "";

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
      case "command": scrolled(term, () => { term.append(line(`$ ${e.cmd}\n`, "cmd")); commands.set(e.id, true); }); break;
      case "output": scrolled(term, () => term.append(line(e.data, e.stream === "stderr" ? "err" : ""))); break;
      case "command_end": scrolled(term, () => term.append(line(`[exit ${e.exitCode}${e.timedOut ? ", timed out" : ""}${e.truncated ? ", output cut" : ""}]\n`, "end"))); break;
      case "failed": scrolled(chat, () => chat.append(line(`(${e.error})\n`, "muted"))); break;
    }
  }
  function authProtocols() {
    const b64 = btoa(unescape(encodeURIComponent(token))).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
    return token ? ["duet.v1", `duet.auth.${b64}`] : ["duet.v1"];
  }
  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = (socket = new WebSocket(`${scheme}//${location.host}/api/rooms/${encodeURIComponent(room)}/live`, authProtocols()));
    ws.onopen = () => { say("live"); retry = 500; };
    ws.onmessage = (msg) => {
      const e = JSON.parse(msg.data);
      onEvent(e);
      seen = e.seq ?? seen;
      if (seen - acked >= 16) ack();
    };
    ws.onclose = (e) => {
      if (e.code === 4401 && askToken()) return connect();
      say(e.code === 4401 ? "not allowed: wrong or missing token" : "disconnected; reconnecting…", true);
      if (e.code !== 4401) setTimeout(connect, (retry = Math.min(retry * 2, 10000)));
    };
  }
  // Acknowledges what was shown, so the room can tell a slow watcher.
  function ack() {
    if (socket?.readyState !== WebSocket.OPEN) return;
    socket.send(JSON.stringify({ type: "ack", seq: seen }));
    acked = seen;
  }
  setInterval(() => { if (seen > acked) ack(); }, 250);
  function askToken() {
    const given = prompt("This Duet needs its API token:");
    if (!given) return false;
    token = given.trim();
    sessionStorage.setItem("duet-token", token);
    return true;
  }
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
