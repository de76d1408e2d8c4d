// The page's script. The home page enters or creates a room. The room page
// renders the room's live feed (GET /api/rooms/{id}/live, a WebSocket) and
// sends messages and commands through the plain HTTP routes. The sandbox's
// commands show in a read-only terminal, the command log (xterm.js, loaded
// by the room page only), each named by who ran it, so colours, `\r`
// progress bars and cursor movement look as they would in a terminal.
// Above it, the shared terminal: the room's one shell, on a socket of its
// own (GET …/terminal), typed into by writers and owners. The page remembers the last `seq` the feed sent and,
// when its socket drops, says it is offline and reconnects by itself with
// `?since=` that `seq`: the feed then sends what was missed, or says to
// start afresh (a `hello` that is not `resumed`, with the history and the
// room's recent events). In token mode the token comes from an invite
// link (`#token=…`, taken off the address bar at once) or is asked for when
// the worker refuses the page (once per tab, again when it is wrong, or with
// the "API token" button); it is kept for the tab and sent as a bearer
// header and, for the socket, as a subprotocol. The feed's hello says the
// page's role: a watcher gets no boxes to type in, an owner the buttons
// that make and revoke invite links.
// The room's policy for the agent's commands is shown (an owner may change
// its mode), and so are the commands waiting for approval, with buttons for
// writers and owners to decide them. The agent's answer shows as it is
// written (`delta` events, one bubble per exchange), until its message,
// which is what counts, takes the place of every bubble.
//
// The room's jobs are listed live (`job`, `job_end`; the list asked for
// afresh at each hello), running first; the selected one's output shows in
// a terminal of its own (asked for when it is selected, then `job_output`
// live). Writers and owners get a button that stops a running job.
//
// The workspace's files show as a tree (GET …/files?path=): the top
// folder's entries, and a folder's own when it is opened. A folder on show
// is asked for again when a `file` event touches it, and all of them at a
// hello that is not `resumed` (a resumed one replays what was missed). A
// selected file's text shows read-only, its first 256 KiB (a Range
// request), or that it is binary; a link saves its bytes from a Blob URL
// (the token may be a header, which a plain link cannot send). Writers and
// owners get a file input that uploads into the folder open or selected.
//
// One global, for tests and the console: `terminalText()`, the command
// log's text, one line per line (however it wraps on screen), what is
// scrolled out of view included; `terminalText("shell")` is the shared
// terminal's, `terminalText("job-term")` the job's.
"use strict";
if (document.body.dataset.page === "home") home();
else room();

function home() {
  const form = document.getElementById("enter"), field = document.getElementById("room");
  form.addEventListener("submit", (e) => { e.preventDefault(); location.href = "/rooms/" + encodeURIComponent(field.value.trim()); });
  document.getElementById("new").addEventListener("click", () => { location.href = "/rooms/" + crypto.randomUUID(); });
}

// A terminal in `box` (the room's, or a job's): read-only, fitted to its
// box (again when the box changes size), keeping the last 5000 lines.
// `show` writes a command's events (live, or the `recent` ones of a hello)
// as a terminal would show them: the command as `$ cmd`, its output as
// printed (stderr in red), how it ended; a job's output is written as
// printed too, and `end` writes how something ended, in grey. `clear`
// empties it; `text` reads it.
async function terminal(box) {
  const { term, fit, text } = await xterm(box, { disableStdin: true, convertEol: true, scrollback: 5000 });
  fit.fit();
  new ResizeObserver(() => fit.fit()).observe(box);
  // Whether the last output left its line unfinished: the next line of
  // ours starts on a line of its own.
  let open = false;
  const line = (text, colour) => {
    term.write(`${open ? "\n" : ""}\x1b[0;${colour}m${text}\x1b[0m\n`);
    open = false;
  };
  return {
    text,
    end: (what) => line(`[${what}]`, 90),
    show(e) {
      if (e.type === "command") line(`${e.source ? `${ranBy(e)} ran: ` : "$ "}${printable(e.cmd)}`, 32);
      else if (e.type === "command_end") line(`[exit ${e.exitCode}${e.timedOut ? ", timed out" : ""}${e.truncated ? ", output cut" : ""}]`, 90);
      else if (e.data) {
        term.write(e.stream === "stderr" ? `\x1b[31m${e.data}\x1b[39m` : e.data);
        open = !e.data.endsWith("\n");
      }
    },
    // In the order of writes (a reset, ESC c): output written before it
    // may not have been drawn yet.
    clear() {
      term.write("\x1bc");
      open = false;
    },
  };
}

// Who ran a command of the log: the person who ran it (exec), the agent,
// or the MCP client (by its token's name, else the client's own).
function ranBy(e) {
  if (e.source === "agent") return "agent";
  return printable(e.askedBy || (e.source === "mcp" ? "an MCP client" : "someone"));
}

// An xterm.js terminal in `box` with `options` and the page's look, its fit
// add-on loaded, and `text()`, which reads it: one line per line (however
// it wraps on screen), what is scrolled out of view included.
async function xterm(box, options) {
  const [{ Terminal }, { FitAddon }] = await Promise.all([import("/assets/xterm.js"), import("/assets/addon-fit.js")]);
  const css = getComputedStyle(document.documentElement), colour = (name) => css.getPropertyValue(name).trim();
  const term = new Terminal({
    ...options,
    // Screen readers get the text: the rows drawn are hidden from them.
    screenReaderMode: true,
    fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
    fontSize: 13,
    theme: { background: colour("--term-bg"), foreground: colour("--term-fg"), green: "#7ee787", red: "#ff7b72", brightBlack: "#8b949e" },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  const text = () => {
    const buffer = term.buffer.active, rows = [];
    for (let i = 0; i < buffer.length; i++) {
      const row = buffer.getLine(i), wraps = buffer.getLine(i + 1)?.isWrapped;
      rows.push((row.isWrapped ? rows.pop() ?? "" : "") + row.translateToString(!wraps));
    }
    return rows.join("\n").trimEnd();
  };
  return { term, fit, text };
}

// A command as typed, its control characters shown, not obeyed: a command
// line cannot clear or recolour everyone's terminal (its output may).
function printable(cmd) {
  return cmd.replace(/[\0-\x08\x0b-\x1f\x7f-\x9f]/g, (c) => (c < " " ? String.fromCharCode(0x2400 + c.charCodeAt(0)) : "\ufffd"));
}

async function room() {
  const room = decodeURIComponent(location.pathname.split("/").pop());
  const feedPath = `/api/rooms/${encodeURIComponent(room)}/live`;
  const $ = (id) => document.getElementById(id);
  const chat = $("chat"), status = $("status"), tokenButton = $("token");
  $("room-id").textContent = room;
  const term = await terminal($("term"));
  const shell = await xterm($("shell"), { scrollback: 1000 });
  // The job terminal is made when a job is first selected (a hidden box
  // has no size to fit).
  let jobTerm = null, jobTermMade = null;
  window.terminalText = (box = "term") => (box === "term" ? term : box === "shell" ? shell : jobTerm)?.text() ?? "";
  // An invite link's token rides in the fragment, which no server sees;
  // it is kept for the tab and taken off the address bar.
  const invited = new URLSearchParams(location.hash.slice(1)).get("token");
  if (invited) {
    sessionStorage.setItem("duet-token", invited);
    history.replaceState(null, "", location.pathname + location.search);
  }
  let token = sessionStorage.getItem("duet-token") || "";
  // The socket of the moment, with the last `seq` it received and the last
  // it acknowledged; the last `seq` any socket received, which a new one
  // resumes from; the next reconnect's delay, and its timer.
  let feed = null, since = null, retry = 500, retrying = null;
  // What the feed's hello said this page may do.
  let role = "watcher";
  // The policy shown, and how many `policy` events came: one that comes
  // while the policy is asked for is newer than the answer.
  let policy = null, policies = 0;
  // The waiting commands shown, by id, and the ids decided since the page
  // opened (an answer to GET /approvals may be older than their `decided`).
  const asks = new Map(), settled = new Set();
  // The agent's answers being written, by exchange.
  const writing = new Map();
  // The room's jobs, by id; those being stopped; the one whose output is
  // shown: its id, the `job_output` chunks that came while its output was
  // asked for (null once it came), and whether its end is written.
  const jobs = new Map(), stopping = new Set();
  let shown = null;
  // The workspace's folders: their listings as last asked for, by path (""
  // the top), and the ones open; the file selected ({path}, a new object
  // each time it is shown afresh); the folder an upload goes into.
  const listings = new Map(), opened = new Set([""]);
  let picked = null, here = "", blobUrl = null, listError = null;
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
  function delta(e) {
    scrolled(chat, () => {
      let div = writing.get(e.exchange);
      if (!div) {
        div = el("", "msg agent writing", "div");
        div.append(el("agent: ", "who"));
        writing.set(e.exchange, div);
        chat.append(div);
      }
      div.append(document.createTextNode(e.text));
    });
  }
  function doneWriting() {
    for (const div of writing.values()) div.remove();
    writing.clear();
  }
  // What the page shows of the room, before the feed shows it afresh.
  function forget() {
    doneWriting();
    chat.textContent = "";
    term.clear();
    jobs.clear();
    renderJobs();
    // The job's output is asked for afresh after the hello.
    if (shown) shown.pending = [];
  }
  function message(m) {
    if (m.role === "agent") doneWriting();
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
  function el(text, cls, tag = "span") {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    e.textContent = text;
    return e;
  }
  // What the feed says this page may do.
  function hello(e) {
    role = e.role;
    $("role").textContent = `you: ${e.role}`;
    $("mode").disabled = role !== "owner";
    $("say").hidden = $("run").hidden = $("upload").hidden = e.role === "watcher";
    $("invite").hidden = !e.invites;
    if (e.name) $("name").value = e.name;
    $("name").readOnly = Boolean(e.name);
    me = e.name ?? null;
    shell.term.options.disableStdin = role === "watcher";
    // The feed is let in: so is the terminal, with the same token. A
    // socket that is down for a reason other than the room's end comes
    // back (a sleeping room's too: the feed's own return woke it).
    if (!shellSocket || (shellSocket.down && !shellSocket.final)) connectShell();
    else if (!shellSocket.down && shellSocket.ws.readyState === WebSocket.OPEN) shellSays();
    // Resumed, the feed sends what was missed next; otherwise this is the
    // whole truth: the history, and the room as the others see it (`recent`,
    // logged events shown as live ones: the terminal's recent past, an
    // answer still being written).
    if (!e.resumed) {
      forget();
      // Changes missed are not replayed: every folder shown, and the file, afresh.
      for (const dir of opened) if (visible(dir)) refresh(dir);
      if (picked) once("view", showFile);
      e.history.forEach(message);
      // A job of the past is not selected for it: the list picks one.
      e.recent?.forEach((r) => (r.type === "job" ? job(r.job) : onEvent(r)));
    }
    // Output asked for while the socket was down, or to be asked afresh.
    if (shown?.pending) select(shown.id);
    renderJobs();
    call("jobs", undefined, "GET").then((j) => {
      j.jobs?.forEach(job);
      if (!shown && jobs.size) select(sorted()[0].id);
    });
    say("live");
    // What changed while the page was away is asked for afresh.
    const seen = policies;
    call("policy", undefined, "GET").then((p) => seen === policies && showPolicy(p));
    $("asks").textContent = "";
    asks.clear();
    call("approvals", undefined, "GET").then((j) => j.approvals?.forEach(ask));
  }
  function showPolicy(p) {
    if (!p?.allow) return;
    policy = p;
    $("mode").value = p.agentCommands;
    $("rules").replaceChildren(...["allow", "deny"].flatMap((k) => [` ${k}:`, ...(p[k].length ? p[k].map((r) => el(r, "", "code")) : [" none"])]));
  }
  // A command that waits: writers and owners get its buttons.
  function ask(a) {
    if (asks.has(a.id) || settled.has(a.id)) return;
    const li = document.createElement("li"), act = el("", "muted");
    if (role !== "watcher") {
      act.append(...["Approve", "Deny"].map((text) => {
        const b = el(text, "quiet", "button");
        b.type = "button";
        b.onclick = () => decide(a.id, text.toLowerCase(), act);
        return b;
      }));
    }
    li.append(el(a.command, "", "code"), el(`asked by ${a.askedBy || "someone"}, expires at ${new Date(a.expiresAt).toLocaleTimeString()}`, "muted"), act);
    asks.set(a.id, act);
    $("asks").append(li);
  }
  // Someone else deciding first is a note on the entry (409), not an error.
  async function decide(id, decision, act) {
    const json = await call(`approvals/${id}`, { decision, userId: $("name").value.trim() || undefined }, "POST", 409);
    if (json.error) act.textContent = json.error;
  }
  // A decided command says how and by whom for a moment, then goes (the
  // event holds the decided approval).
  function decided(e) {
    const d = e.approval, act = asks.get(d.id);
    settled.add(d.id);
    if (!act) return;
    asks.delete(d.id);
    act.textContent = `${d.decision}${d.decidedBy ? ` by ${d.decidedBy}` : ""}`;
    setTimeout(() => act.parentNode.remove(), 5000);
  }
  // A job as the feed or the API says it is now. Ended is for good: an
  // answer older than its `job_end` does not make it run again.
  function job(j) {
    const had = jobs.get(j.id);
    if (!had || had.state === "running" || j.state !== "running") {
      const { output, ...kept } = j;
      jobs.set(j.id, kept);
    }
    renderJobs();
    if (shown?.id === j.id && !shown.pending) ended(jobs.get(j.id));
  }
  // The running jobs, then the ended ones, newest first (as the API lists them).
  const sorted = () => [...jobs.values()].sort((a, b) => (b.state === "running") - (a.state === "running") || b.startedAt.localeCompare(a.startedAt));
  const VIA = { agent: " through the agent", mcp: " through MCP" };
  function renderJobs() {
    const focused = document.activeElement?.closest?.("#jobs li")?.dataset.id;
    $("jobs").replaceChildren(...sorted().map((j) => {
      const li = el("", j.id === shown?.id ? "shown" : "", "li"), pick = el("", "pick", "button");
      li.dataset.id = j.id;
      pick.type = "button";
      pick.setAttribute("aria-pressed", String(j.id === shown?.id));
      pick.append(...(j.name ? [el(j.name, "", "b")] : []), el(j.cmd, "", "code"));
      pick.onclick = () => select(j.id);
      li.append(pick, el(`${j.state}${j.exitCode == null ? "" : ` (code ${j.exitCode})`}`, `state ${j.state}`), el(`started by ${j.startedBy || "someone"}${VIA[j.source] ?? ""} at ${new Date(j.startedAt).toLocaleTimeString()}`, "muted"));
      if (j.state === "running" && role !== "watcher") {
        const b = el(stopping.has(j.id) ? "Stopping…" : "Stop", "quiet", "button");
        b.type = "button";
        b.disabled = stopping.has(j.id);
        b.onclick = () => stop(j.id);
        li.append(b);
      }
      return li;
    }));
    $("no-jobs").hidden = jobs.size > 0;
    if (focused) $("jobs").querySelector(`[data-id="${focused}"] .pick`)?.focus();
  }
  // Shows job `id`'s output: what the API keeps of it, then what the feed
  // brings. Chunks that come while it is asked for wait; those the answer
  // already holds (a first few of them, in order) are left out.
  async function select(id) {
    const mine = (shown = { id, pending: [], ended: false });
    renderJobs();
    $("job-view").hidden = false;
    const title = (j) => ($("job-title").textContent = `Output of ${j.name || j.cmd}`);
    if (jobs.has(id)) title(jobs.get(id));
    jobTerm = await (jobTermMade ??= terminal($("job-term")));
    const { job: j } = await call(`jobs/${id}`, undefined, "GET", 404);
    if (shown !== mine) return;
    if (!j) {
      shown = null;
      $("job-view").hidden = true;
      return renderJobs();
    }
    title(j);
    jobTerm.clear();
    jobTerm.show({ type: "command", cmd: j.cmd });
    let k = mine.pending.length;
    while (k > 0 && !j.output.endsWith(mine.pending.slice(0, k).join(""))) k--;
    for (const data of [j.output, ...mine.pending.slice(k)]) jobTerm.show({ data });
    mine.pending = null;
    job(j);
  }
  function jobOutput(e) {
    if (shown?.id !== e.id) return;
    if (shown.pending) shown.pending.push(e.data);
    else jobTerm.show(e);
  }
  function ended(j) {
    if (j.state === "running" || shown.ended) return;
    shown.ended = true;
    jobTerm.end(`${j.state}${j.exitCode == null ? "" : `, code ${j.exitCode}`}`);
  }
  // Answers once the job ended (a stubborn one is killed after 5 s).
  async function stop(id) {
    stopping.add(id);
    renderJobs();
    const json = await call(`jobs/${id}`, undefined, "DELETE");
    stopping.delete(id);
    if (json.job) job(json.job);
    else renderJobs();
  }
  // Runs `task` for `key` one at a time: asked for while it runs, it runs
  // once more after, so the last answer shown is newer than the last ask.
  const tasks = new Map();
  function once(key, task) {
    const had = tasks.get(key);
    if (had) return void (had.again = true);
    const mine = { again: true };
    tasks.set(key, mine);
    (async () => {
      try {
        while (mine.again) {
          mine.again = false;
          await task();
        }
      } finally {
        tasks.delete(key);
      }
    })();
  }
  const SHOWN = 256 * 1024, WHOLE = 8 * 1024 * 1024;
  const filesRoute = (path) => `files?path=${encodeURIComponent(path)}`;
  const parentOf = (path) => path.slice(0, Math.max(path.lastIndexOf("/"), 0));
  const join = (dir, name) => (dir ? `${dir}/${name}` : name);
  const bytes = (n) => `${n.toLocaleString("en")} byte${n === 1 ? "" : "s"}`;
  const brief = (n) => (n < 1024 ? bytes(n) : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`);
  // A folder shows when it and every folder above it are open.
  const visible = (dir) => opened.has(dir) && (dir === "" || visible(parentOf(dir)));
  const refresh = (dir) => once(`dir:${dir}`, () => list(dir));
  function note(text, bad) {
    $("files-note").textContent = text;
    $("files-note").classList.toggle("bad", Boolean(bad));
  }
  // Asks for a folder's listing; one that is gone is closed.
  async function list(dir) {
    const res = await request(filesRoute(dir)).catch(() => null);
    const json = await res?.json().catch(() => ({}));
    if (res?.ok && json.entries) {
      listings.set(dir, json);
      if (listError && $("files-note").textContent === listError) note("");
    } else if (res?.status === 404 && dir) forgetFolder(dir);
    else note((listError = json?.error ?? "the files could not be read"), true);
    renderFiles();
  }
  // A folder deleted: it and what is under it are no longer open.
  function forgetFolder(dir) {
    const under = (p) => p === dir || p.startsWith(`${dir}/`);
    for (const p of [...opened]) if (under(p)) opened.delete(p);
    for (const p of [...listings.keys()]) if (under(p)) listings.delete(p);
    if (under(here)) here = parentOf(dir);
  }
  function renderFiles() {
    const focused = document.activeElement?.closest?.("#tree li")?.dataset.path;
    const top = listings.get("");
    $("tree").replaceChildren(...(top ? entries("") : []));
    $("no-files").hidden = !top || top.entries.length > 0;
    $("upload-to").textContent = `Upload into ${here ? `${here}/` : "the top folder"}:`;
    if (focused !== undefined) [...$("tree").querySelectorAll("li")].find((li) => li.dataset.path === focused)?.querySelector(".entry")?.focus();
  }
  // A folder's entries as list items; an open folder's own under it.
  function entries(dir) {
    const listing = listings.get(dir);
    if (!listing) return [el("loading…", "muted", "li")];
    const items = listing.entries.map((e) => {
      const path = join(dir, e.name), li = el("", "", "li");
      li.dataset.path = path;
      // A link is followed only once asking for it answered a folder.
      const folder = e.type === "dir" || (e.type === "symlink" && listings.has(path));
      if (e.type === "other") {
        li.append(el(e.name, "entry", "code"), el("special file", "muted"));
        return li;
      }
      const b = el("", "entry", "button");
      b.type = "button";
      if (folder) {
        const open = opened.has(path);
        b.setAttribute("aria-expanded", String(open));
        b.textContent = `${open ? "▾" : "▸"} ${e.name}/`;
        b.onclick = () => toggle(path);
        li.append(b);
        if (e.type === "symlink") li.append(el("link", "muted"));
        if (open) {
          const ul = el("", "", "ul"), inside = entries(path);
          ul.append(...(inside.length ? inside : [el("empty", "muted", "li")]));
          li.append(ul);
        }
      } else {
        b.textContent = e.name;
        b.setAttribute("aria-pressed", String(picked?.path === path));
        b.onclick = () => pick(path);
        li.append(b, el(e.type === "symlink" ? "link" : brief(e.size), "muted"));
      }
      return li;
    });
    if (listing.truncated) items.push(el(`only the first ${listing.entries.length.toLocaleString("en")} entries are shown`, "muted", "li"));
    return items;
  }
  // Opens a folder (asking for its listing) or closes it; uploads go into the one opened.
  function toggle(dir) {
    if (opened.has(dir)) {
      opened.delete(dir);
      if (here === dir || here.startsWith(`${dir}/`)) here = parentOf(dir);
    } else {
      opened.add(dir);
      here = dir;
      refresh(dir);
    }
    renderFiles();
  }
  function pick(path) {
    picked = { path };
    here = parentOf(path);
    renderFiles();
    $("file-view").hidden = false;
    $("file-title").textContent = path;
    view("loading…");
    once("view", showFile);
  }
  // What the view shows: a note, the text (or none), the bytes to save
  // (all of them, or null when only a part came), the file's size.
  function view(what, text = null, whole = null, size = 0) {
    $("file-note").textContent = what;
    $("file-text").hidden = text === null;
    $("file-text").textContent = text ?? "";
    if (blobUrl) URL.revokeObjectURL(blobUrl);
    blobUrl = null;
    const link = $("file-download");
    link.removeAttribute("download");
    link.hidden = whole === null && !(size > SHOWN && size <= WHOLE);
    if (whole) offer(new Blob([whole]));
    else link.href = "#";
    link.textContent = "Download";
  }
  function offer(blob) {
    const link = $("file-download");
    blobUrl = link.href = URL.createObjectURL(blob);
    link.download = picked.path.split("/").pop();
  }
  // The selected file's first 256 KiB, shown as text unless they are not
  // UTF-8 or hold a NUL; a link that turns out to be a folder opens.
  async function showFile() {
    const mine = picked;
    if (!mine || mine.deleted) return;
    const res = await request(filesRoute(mine.path), { headers: { range: `bytes=0-${SHOWN - 1}` } }).catch(() => null);
    const body = new Uint8Array((await res?.arrayBuffer().catch(() => null)) ?? []);
    if (picked !== mine) return;
    if (!res) return view("the file could not be read");
    const json = () => { try { return JSON.parse(new TextDecoder().decode(body)); } catch { return {}; } };
    if (res.status === 200 && res.headers.get("content-type")?.startsWith("application/json")) {
      const listing = json();
      if (!listing.entries) return view(listing.error ?? "the file could not be read");
      listings.set(mine.path, listing);
      opened.add(mine.path);
      here = mine.path;
      picked = null;
      $("file-view").hidden = true;
      return renderFiles();
    }
    if (res.status === 416) return view("Empty file", null, new Uint8Array());
    if (!res.ok) return view(json().error ?? `the file could not be read (${res.status})`);
    const size = Number(res.headers.get("content-range")?.split("/")[1] ?? body.length), cut = body.length < size;
    const text = body.includes(0) ? null : utf8(body, cut);
    const what = text === null ? `Binary file, ${bytes(size)}: not shown` : cut ? `showing the first 256 KiB of ${bytes(size)}` : bytes(size);
    view(`${what}${size > WHOLE ? " (too large to download here: 8 MiB at most)" : ""}`, text, cut ? null : body, size);
  }
  // Text, or null for bytes that are not UTF-8; a cut may end inside a character.
  function utf8(body, cut) {
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(body, { stream: cut });
    } catch {
      return null;
    }
  }
  // The link of a file larger than what is shown asks for all its bytes first.
  $("file-download").addEventListener("click", async (e) => {
    const link = e.currentTarget, mine = picked;
    if (link.hasAttribute("download") || !mine) return;
    e.preventDefault();
    link.textContent = "Downloading…";
    const res = await request(filesRoute(mine.path)).catch(() => null);
    const blob = res?.ok ? await res.blob() : null;
    if (picked !== mine) return;
    link.textContent = "Download";
    if (!blob) return ($("file-note").textContent = (await res?.json().catch(() => null))?.error ?? "the file could not be downloaded");
    offer(blob);
    link.click();
  });
  // A change of the workspace: the folders shown on its way are asked for
  // again (the one it is in, and those that do not list the way to it yet),
  // and the selected file is shown again, or said to be deleted.
  function fileChanged(e) {
    if (e.change === "deleted") forgetFolder(e.path);
    const parts = e.path.split("/");
    for (let i = 0; i < parts.length; i++) {
      const dir = parts.slice(0, i).join("/");
      if (!visible(dir)) break;
      if (i === parts.length - 1 || !listings.get(dir)?.entries.some((x) => x.name === parts[i])) refresh(dir);
    }
    renderFiles();
    if (!picked || (picked.path !== e.path && !picked.path.startsWith(`${e.path}/`))) return;
    if (e.change === "written") return once("view", showFile);
    picked = { path: picked.path, deleted: true };
    view(`This file was deleted${e.changedBy ? ` by ${e.changedBy}` : ""}.`);
  }
  // Uploads the chosen file into the folder open or selected (or the top).
  $("upload-file").addEventListener("change", async () => {
    const input = $("upload-file"), file = input.files[0];
    if (!file) return;
    const path = join(here, file.name);
    input.value = "";
    if (file.size > WHOLE) return note(`${file.name} is ${bytes(file.size)}: an upload may be 8 MiB at most`, true);
    note(`uploading ${path}…`);
    input.disabled = true;
    const res = await request(filesRoute(path), { method: "PUT", headers: { "content-type": "application/octet-stream" }, body: file }).catch(() => null);
    const json = (await res?.json().catch(() => null)) ?? {};
    input.disabled = false;
    if (!res?.ok) return note(json.error ?? "the upload failed", true);
    note(`uploaded ${json.path} (${bytes(json.size)})`);
    refresh(parentOf(path));
  });
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
      case "gap": forget(); break;
      case "presence": presence(e.watchers); break;
      case "message": message(e.message); break;
      case "delta": delta(e); break;
      case "command": case "output": case "command_end": term.show(e); break;
      case "job": job(e.job); if (!shown) select(e.job.id); break;
      case "job_end": job(e.job); break;
      case "job_output": jobOutput(e); break;
      case "file": fileChanged(e); break;
      case "policy": policies++; showPolicy(e.policy); break;
      case "approval": ask(e.approval); break;
      case "decided": decided(e); break;
      case "failed": doneWriting(); scrolled(chat, () => chat.append(el(`(${e.error})\n`, "muted"))); break;
      case "closed": {
        const what = ENDS[e.reason] ?? e.reason;
        if (e.reason === "deleted" || e.reason === "expired") {
          scrolled(chat, () => chat.append(el(`(${what}: its history and files are gone)\n`, "muted")));
          say(`${what}; reload the page to start it afresh`, true);
        } else say(`${what}; ask the room's owner for a new one`, true);
        break;
      }
    }
  }
  function authProtocols(protocol = "duet.v1") {
    const b64 = btoa(unescape(encodeURIComponent(token))).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
    return token ? [protocol, `duet.auth.${b64}`] : [protocol];
  }
  // The shared terminal (GET …/terminal, a WebSocket of its own): one shell
  // for the room. Its first frame redraws it at the shell's size
  // (`screen`), then its output comes as printed. Writers and owners type
  // into it; when they focus it or first type, their box's size is sent
  // (one shell has one size: the last sent wins). A watcher's keys are not
  // sent. A dropped socket is opened again after a while; one the room's
  // sleep closed, when the box is clicked (which wakes it); one the room's
  // end or a revoked link closed, never. `shellSocket` is the socket of
  // the moment: whether it is down, for good, and why.
  let shellSocket = null, shellRetry = 500, shellTimer = null, sized = false, me = null, typingTimer = null;
  const SHELL_ENDS = { deleted: "the room was deleted", expired: "the room expired", revoked: "your link was revoked", 4401: "your link is no longer valid", 4403: "only writers may type here", 4410: "the room is gone" };
  function shellSays(text = null) {
    const note = $("shell-note");
    note.textContent = text ?? (role === "watcher" ? "watching: only writers type" : "everyone in the room sees what you type");
    note.classList.toggle("bad", text !== null);
    note.classList.toggle("wake", text === ASLEEP);
  }
  const ASLEEP = "the room is asleep — click to wake";
  function connectShell() {
    clearTimeout(shellTimer);
    shellSocket?.ws.close();
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}/api/rooms/${encodeURIComponent(room)}/terminal`, authProtocols("duet.term.v1"));
    const mine = (shellSocket = { ws, down: false, final: false, reason: null, pings: 0 });
    shellSays("connecting…");
    ws.onopen = () => {
      shellRetry = 500;
      shellSays();
      mine.pings = setInterval(() => ws.send('{"type":"ping"}'), 25_000);
    };
    ws.onmessage = (msg) => {
      if (shellSocket !== mine) return;
      const f = JSON.parse(msg.data);
      if (f.type === "screen") {
        shell.term.reset();
        shell.term.resize(f.cols, f.rows);
        shell.term.write(f.data);
        sized = false;
      } else if (f.type === "output") shell.term.write(f.data);
      else if (f.type === "typing" && f.name !== me) typing(f.name);
      else if (f.type === "closed") mine.reason = f.reason;
    };
    ws.onclose = (e) => {
      clearInterval(mine.pings);
      if (shellSocket !== mine) return;
      mine.down = true;
      if (mine.reason === "asleep" || e.code === 4409) return shellSays(ASLEEP);
      const end = SHELL_ENDS[mine.reason] ?? SHELL_ENDS[e.code];
      if (end) {
        mine.final = true;
        return shellSays(end);
      }
      shellSays("disconnected; reconnecting…");
      shellTimer = setTimeout(connectShell, (shellRetry = Math.min(shellRetry * 2, 10000)));
    };
  }
  function shellSend(frame) {
    if (shellSocket?.ws.readyState === WebSocket.OPEN) shellSocket.ws.send(JSON.stringify(frame));
  }
  // The shell takes this page's size: its box, fitted.
  function sendSize() {
    if (role === "watcher") return;
    shell.fit.fit();
    shellSend({ type: "resize", cols: shell.term.cols, rows: shell.term.rows });
    sized = shellSocket?.ws.readyState === WebSocket.OPEN;
  }
  shell.term.onData((data) => {
    if (role === "watcher") return;
    if (!sized) sendSize();
    shellSend({ type: "input", data });
  });
  shell.term.textarea?.addEventListener("focus", sendSize);
  for (const id of ["shell", "shell-note"]) $(id).addEventListener("click", () => shellSocket?.down && !shellSocket.final && connectShell());
  // "ana is typing…", gone 2 s after the last word of it.
  function typing(name) {
    const note = $("typing");
    note.textContent = `${name || "someone"} is typing…`;
    note.classList.add("on");
    clearTimeout(typingTimer);
    typingTimer = setTimeout(() => note.classList.remove("on"), 2000);
  }
  // Opens the feed, resuming from `since` when there is one; a socket it
  // replaces is closed, and what it still says is not this page's.
  function connect() {
    clearTimeout(retrying);
    retrying = null;
    feed?.ws.close();
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const query = since === null ? "" : `?since=${since}`;
    const ws = new WebSocket(`${scheme}//${location.host}${feedPath}${query}`, authProtocols());
    const mine = (feed = { ws, seen: 0, acked: 0, opened: false, closed: false, pings: 0 });
    ws.onopen = () => {
      mine.opened = true;
      retry = 500;
      // The runtime answers without waking the room; a watcher that stays
      // silent is taken for gone (4408).
      mine.pings = setInterval(() => ws.send('{"type":"ping"}'), 25_000);
    };
    ws.onmessage = (msg) => {
      if (feed !== mine) return;
      const e = JSON.parse(msg.data);
      if (e.type === "pong") return;
      onEvent(e);
      mine.closed ||= e.type === "closed";
      since = mine.seen = e.seq ?? mine.seen;
      // A heartbeat asks for an answer even when nothing new was shown.
      if (mine.seen - mine.acked >= 16 || e.type === "heartbeat") ack(mine);
    };
    ws.onclose = (e) => {
      clearInterval(mine.pings);
      // Replaced; or the room is gone, or the token (4410, 4401, after a
      // `closed`): coming back would not help.
      if (feed !== mine || mine.closed || e.code === 4410 || e.code === 4401) return;
      if (mine.opened) reconnect();
      else refused();
    };
  }
  // Tries again after a while; offline, as soon as the browser is back
  // online (`retrying` is then "online" rather than a timer).
  function reconnect() {
    say("offline; reconnecting…", true);
    retrying = navigator.onLine ? setTimeout(connect, (retry = Math.min(retry * 2, 10000))) : "online";
  }
  addEventListener("offline", () => feed?.ws.close());
  addEventListener("online", () => {
    if (retrying === null) return;
    retry = 500;
    connect();
  });
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
  tokenButton.addEventListener("click", () => askToken("API token:") && connect());
  // A request of the room's API, with the token; asked for again after a 401.
  async function request(path, init = {}) {
    const headers = { ...init.headers };
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await fetch(`/api/rooms/${encodeURIComponent(room)}/${path}`, { ...init, headers });
    if (res.status === 401 && askToken()) return request(path, init);
    return res;
  }
  // A call of the room's API; its error is shown, unless its status is `expected`.
  async function call(path, body, method = "POST", expected) {
    const headers = body ? { "content-type": "application/json" } : {};
    const res = await request(path, { method, headers, body: body && JSON.stringify(body) });
    const json = await res.json().catch(() => ({}));
    if (json.error && res.status !== expected) say(json.error, true);
    return json;
  }
  $("name").addEventListener("change", () => sendName());
  // An owner's choice of mode; refused, the select shows the policy again.
  $("mode").addEventListener("change", async () => {
    const json = await call("policy", { agentCommands: $("mode").value }, "PUT");
    showPolicy(json.error ? policy : json);
  });
  $("say").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("text").value.trim(), userId = $("name").value.trim();
    if (!text) return;
    localStorage.setItem("duet-name", userId);
    sendName();
    $("text").value = "";
    call("message", userId ? { text, userId } : { text });
  });
  $("run").addEventListener("submit", (e) => {
    e.preventDefault();
    const cmd = $("cmd").value;
    if (!cmd.trim()) return;
    $("cmd").value = "";
    const userId = $("name").value.trim();
    call("sandbox/exec", userId ? { cmd, userId } : { cmd });
  });
  // An owner's invite links: made, shown to copy, and all revoked at once.
  $("invite").addEventListener("submit", async (e) => {
    e.preventDefault();
    const name = $("guest").value.trim();
    const json = await call("invites", name ? { role: e.submitter.value, name } : { role: e.submitter.value });
    if (!json.link) return;
    $("link").hidden = false;
    $("link").value = json.link;
    $("link").select();
    say(`a ${json.role} link, valid until ${new Date(json.expiresAt).toLocaleString()}`);
  });
  $("revoke").addEventListener("click", async () => {
    const json = await call("invites", undefined, "DELETE");
    if (!json.revoked) return;
    $("link").hidden = true;
    say("every invite link was revoked");
    // Revoking ended this page's own token too: it goes on with the new one.
    if (!json.invite) return;
    token = json.invite.token;
    sessionStorage.setItem("duet-token", token);
    connect();
    connectShell();
  });
  connect();
}
