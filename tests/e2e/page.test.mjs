// The web page in a real browser (Debian's Chromium, driven by
// playwright-core): two people in one room; one sends a message and runs a
// command that prints a line a second; the other sees the message, and each
// line as it is printed, not all at the end. The terminal (xterm.js) shows
// colours as styled cells and a progress bar as its last state; a late
// joiner's terminal shows what an early watcher's does. A page that goes
// offline says so, and back online shows what ran meanwhile once each; one
// that reconnects resumes with `since` and misses nothing after it; against
// a stand-in feed, the page keeps to the feed's protocol (resume, gap,
// keep-alive, close codes). One that needs the token asks for it, and for
// a new one when it is wrong; a deleted room says so; a page on another
// origin can neither run a command nor watch; an owner's invite links bring a
// watcher, who sees the room live and cannot type, and a writer, who can,
// until the owner revokes them; and in a room that asks, a command of the
// agent waits on every page until a writer approves it. The agent's answer
// grows on the page as the model writes it. A writer's page lists the
// room's jobs live, a job's output as it prints and how it ended, and stops
// one (even one that ignores SIGTERM) by its button; a watcher's page shows
// the jobs and their output, on joining, live and after going offline, with
// no button to stop them. The file panel: a writer's page shows the
// workspace (empty, then files as they are written), a folder's files when
// it is opened, a file's text (its first 256 KiB), that a file is binary,
// a download of exactly its bytes, and uploads into the folder open (the
// worker's refusal shown); a watcher's shows the files, a link that leads
// to a folder as one and one that leads outside as refused, HTML as text,
// and no upload. The shared terminal: what a writer's page types every
// page shows; a watcher's page sends nothing; a dropped socket comes back.
// The command log names who ran each command.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { chromium } from "playwright-core";

import { bearer, invite } from "./support/rooms.mjs";
import { pageAssets, ROOT, startSandboxd, startWorker, tempDir } from "./support/stack.mjs";
import { sleep, until } from "./support/wait.mjs";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
// As a sandboxed machine runs it: no GPU, no network but loopback, no setuid sandbox as root.
const ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/**
 * Records the page's sockets: how many events each received, what it sent,
 * and how it closed; the feed's in `sockets`, the shared terminal's in
 * `termSockets`.
 */
function recordSockets() {
  const Native = WebSocket;
  window.sockets = [];
  window.termSockets = [];
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      const record = (this.record = { socket: this, events: 0, opened: false, closes: [], sent: [] });
      (String(args[0]).includes("/terminal") ? window.termSockets : window.sockets).push(record);
      this.addEventListener("open", () => (record.opened = true));
      this.addEventListener("message", () => record.events++);
      this.addEventListener("close", (e) => record.closes.push(e.code));
    }
    send(data) {
      this.record.sent.push(data);
      super.send(data);
    }
  };
}
const sockets = (page) => page.evaluate(() => window.sockets.map(({ events, opened, closes }) => ({ events, opened, closes })));
const statusIs = (page, text) => page.waitForFunction((t) => document.getElementById("status").textContent === t, text);
// The terminal's text, through the page's one hook (xterm.js draws only the rows in view).
const terminal = (page) => page.evaluate(() => terminalText());

describe("the web page", () => {
  let sandboxd, worker, browser;
  before(async () => {
    sandboxd = await startSandboxd();
    worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url } });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
  });
  after(async () => {
    await browser?.close();
    await worker?.stop();
    await sandboxd?.stop();
  });

  async function open(room, name) {
    const context = await browser.newContext({ viewport: { width: 1100, height: 700 } });
    await context.addInitScript(recordSockets);
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${worker.url}/rooms/${room}`);
    await page.waitForFunction(() => document.getElementById("status").textContent === "live");
    await page.fill("#name", name);
    return { page, errors };
  }

  test("the home page enters a room", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${worker.url}/`);
    await page.getByLabel("Room id").fill("from-home");
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/rooms\/from-home$/);
    assert.equal(await page.textContent("#room-id"), "from-home");
    await context.close();
  });

  test("a second person sees the message and every line of a command as it comes", async () => {
    const room = randomUUID();
    const [a, b] = [await open(room, "ana"), await open(room, "bo")];
    await a.page.getByLabel("Message to the agent").fill("hello from ana");
    await a.page.keyboard.press("Enter");
    await b.page.waitForFunction(() => document.getElementById("chat").textContent.includes("echo: hello from ana"));
    assert.match(await b.page.textContent("#chat"), /ana: hello from ana/);

    await a.page.getByLabel("Shell command").fill("for i in 1 2 3; do echo $i; sleep 1; done");
    await a.page.keyboard.press("Enter");
    const seen = {};
    for (const line of ["1", "2", "3"]) {
      await b.page.waitForFunction((l) => terminalText().split("\n").includes(l), line, { timeout: 10_000 });
      seen[line] = Date.now();
    }
    await b.page.waitForFunction(() => terminalText().includes("[exit 0]"));
    assert.ok(seen["3"] - seen["1"] >= 1500, `lines arrived ${seen["3"] - seen["1"]} ms apart: they stream`);
    assert.equal(await terminal(b.page), "ana ran: for i in 1 2 3; do echo $i; sleep 1; done\n1\n2\n3\n[exit 0]");
    assert.deepEqual([...a.errors, ...b.errors], []);

    // The picture in the README.
    const shot = path.join(tempDir("page"), "room.png");
    await b.page.screenshot({ path: shot });
    if (process.env.DUET_SCREENSHOT) fs.copyFileSync(shot, path.join(ROOT, "docs/room.png"));
    assert.ok(fs.statSync(shot).size > 10_000);
  });

  test("the agent's answer grows on a second page as it is written, then its message takes its place", async () => {
    const room = randomUUID();
    const [a, b] = [await open(room, "ana"), await open(room, "bo")];
    await a.page.getByLabel("Message to the agent").fill("long 400");
    await a.page.keyboard.press("Enter");
    const partial = await b.page.waitForFunction(() => {
      const writing = document.querySelector("#chat .writing");
      return writing && writing.textContent.includes("word2 ") && writing.textContent;
    });
    const growing = await partial.jsonValue();
    assert.match(growing, /^agent: word1 word2 /);
    assert.doesNotMatch(growing, /word400/, "seen before the end");
    await b.page.waitForFunction(() => document.getElementById("chat").textContent.includes("word400") && !document.querySelector("#chat .writing"));
    const agent = await b.page.$$eval("#chat .msg.agent", (els) => els.map((e) => e.textContent));
    assert.equal(agent.length, 1, "one bubble: the message took the writing one's place");
    assert.match(agent[0], /^agent: word1 .* word400$/);
    assert.deepEqual([...a.errors, ...b.errors], []);
  });

  test("the page is usable by keyboard and labelled", async () => {
    const { page } = await open(randomUUID(), "kim");
    for (const label of ["Your name", "Message to the agent", "Shell command", "When the agent runs a command", "Upload a file"]) {
      assert.equal(await page.getByLabel(label).count(), 1, label);
    }
    await page.focus("#text");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.textContent), "Send");
  });

  test("after a reconnect the page acknowledges again and misses nothing", async () => {
    const room = randomUUID();
    const { page, errors } = await open(room, "ana");
    // Three events per command (command, output, command_end): more than the
    // 256 a watcher may leave unacknowledged, before and after the reconnect.
    const COMMANDS = 100;
    const run = async (tag) => {
      for (let i = 1; i <= COMMANDS; i++) {
        const res = await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: `echo ${tag}-${i}` });
        assert.equal(res.status, 200, res.text);
      }
      await page.waitForFunction((last) => terminalText().includes(`${last}\n[exit 0]`), `${tag}-${COMMANDS}`, { timeout: 10_000 });
    };
    const shown = async (tag) => (await terminal(page)).split("\n").filter((l) => l.startsWith(`${tag}-`));
    const all = (tag) => Array.from({ length: COMMANDS }, (_, i) => `${tag}-${i + 1}`);
    await run("before");
    assert.deepEqual(await shown("before"), all("before"));
    const [first] = await sockets(page);
    assert.ok(first.events > 3 * COMMANDS, `${first.events} events on the first socket`);

    await page.evaluate(() => window.sockets[0].socket.close());
    await page.waitForFunction(() => window.sockets.length === 2 && window.sockets[1].opened);
    assert.match(await page.evaluate(() => window.sockets[1].socket.url), /\?since=\d+$/, "it resumes");
    await statusIs(page, "live");
    await run("after");
    await sleep(500);
    assert.deepEqual(await shown("after"), all("after"), "every command after the reconnect");
    const [, second, ...more] = await sockets(page);
    assert.ok(second.events > 3 * COMMANDS, `${second.events} events on the second socket`);
    assert.deepEqual(second.closes, [], "not dropped as too slow (4008)");
    assert.deepEqual(more, [], "no further reconnect");
    assert.deepEqual(errors, []);
  });

  const exec = async (room, cmd) => {
    const res = await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd });
    assert.equal(res.status, 200, res.text);
  };
  const ended = (page, n) => page.waitForFunction((count) => terminalText().split("\n").filter((l) => /^\[exit \d+/.test(l)).length === count, n, { timeout: 10_000 });

  test("the terminal shows colours as styled cells, a progress bar's last state, each command's lines", async () => {
    const room = randomUUID();
    const { page, errors } = await open(room, "ana");
    await exec(room, String.raw`printf '\033[31mred\033[0m plain\n'`);
    await exec(room, String.raw`printf 'progress 10%%\rprogress 50%%\rprogress 100%%\n'`);
    await exec(room, "printf 'no newline'");
    await exec(room, "echo warned >&2; (exit 3)");
    await ended(page, 4);
    assert.equal(
      await terminal(page),
      [
        String.raw`someone ran: printf '\033[31mred\033[0m plain\n'`, "red plain", "[exit 0]",
        String.raw`someone ran: printf 'progress 10%%\rprogress 50%%\rprogress 100%%\n'`, "progress 100%", "[exit 0]",
        "someone ran: printf 'no newline'", "no newline", "[exit 0]",
        "someone ran: echo warned >&2; (exit 3)", "warned", "[exit 3]",
      ].join("\n"),
    );
    // xterm.js's DOM renderer: a cell's colour is a class of its span, the
    // theme's red for ANSI red and for stderr. It draws on the next
    // animation frame, after the buffer read above: wait for the last row.
    await page.waitForFunction(() => [...document.querySelectorAll("#term .xterm-rows span")].some((s) => s.textContent === "warned"));
    const red = await page.$$eval("#term .xterm-rows span", (spans) => spans.filter((s) => ["red", "warned"].includes(s.textContent)).map((s) => [s.textContent, s.className, getComputedStyle(s).color]));
    assert.deepEqual(red, [["red", "xterm-fg-1", "rgb(255, 123, 114)"], ["warned", "xterm-fg-1", "rgb(255, 123, 114)"]]);
    const rows = await page.$$eval("#term .xterm-rows > div", (divs) => divs.map((d) => d.textContent.trimEnd()));
    assert.deepEqual(rows.filter((r) => r.startsWith("progress")), ["progress 100%"], "only the bar's last state is drawn");
    assert.deepEqual(errors, []);
  });

  // Needs the feed to replay a room's recent terminal events in its hello.
  test("a late joiner's terminal shows what an early watcher's does", async () => {
    const room = randomUUID();
    const early = await open(room, "ana");
    await exec(room, String.raw`printf '\033[32mfirst\033[0m\n'`);
    await exec(room, "for i in 1 2 3; do printf \"$i\\r\"; done; echo done");
    await ended(early.page, 2);
    const late = await open(room, "bo");
    await exec(room, "echo with both open");
    for (const { page } of [early, late]) await ended(page, 3);
    const [a, b] = [await terminal(early.page), await terminal(late.page)];
    assert.match(a, /^someone ran: printf .*\nfirst\n\[exit 0\]\nsomeone ran: for i .*\ndone\n\[exit 0\]\nsomeone ran: echo with both open\nwith both open\n\[exit 0\]$/);
    assert.equal(b, a);
    assert.deepEqual([...early.errors, ...late.errors], []);
  });

  // Needs the feed to resume from `?since=`.
  test("a page that goes offline says so, then shows the commands run meanwhile, once each and in order", async () => {
    const room = randomUUID();
    const { page, errors } = await open(room, "ana");
    await exec(room, "echo before");
    await ended(page, 1);
    await page.context().setOffline(true);
    await statusIs(page, "offline; reconnecting…");
    for (const n of [1, 2, 3]) await exec(room, `echo meanwhile-${n}`);
    await page.context().setOffline(false);
    await statusIs(page, "live");
    await exec(room, "echo after");
    await ended(page, 5);
    const lines = (await terminal(page)).split("\n").filter((l) => !l.startsWith("someone ran: ") && !l.startsWith("["));
    assert.deepEqual(lines, ["before", "meanwhile-1", "meanwhile-2", "meanwhile-3", "after"]);
    const urls = await page.evaluate(() => window.sockets.map((s) => s.socket.url));
    assert.equal(urls.length, 2, "one reconnect");
    assert.match(urls[1], /\?since=\d+$/);
    assert.deepEqual(errors, []);
  });

  test("the page keeps to the feed's protocol (a stand-in feed): resume, gap, keep-alive, close codes", async () => {
    const context = await browser.newContext();
    // The stand-in answers the page's feed: each socket and what the page sent on it.
    const feeds = [];
    await context.routeWebSocket(/\/live(\?|$)/, (ws) => {
      const feed = { ws, url: ws.url(), sent: [] };
      ws.onMessage((m) => feed.sent.push(m));
      feeds.push(feed);
    });
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const socket = async (n) => {
      await until(`socket ${n}`, () => feeds.length >= n, 5_000);
      return feeds[n - 1];
    };
    const send = (feed, ...events) => events.forEach((e) => feed.ws.send(JSON.stringify(e)));
    const hello = (seq, resumed, history = [], recent = []) => ({ type: "hello", seq, resumed, room: "r", history, recent, role: "owner", invites: false });
    const command = (seq, id, cmd, out) => [
      { type: "command", seq, id, cmd, source: "exec" },
      { type: "output", seq: seq + 1, id, stream: "stdout", data: `${out}\n` },
      { type: "command_end", seq: seq + 2, id, exitCode: 0, truncated: false, timedOut: false },
    ];
    const shows = (text) => page.waitForFunction((t) => terminalText() === t, text);
    await page.goto(`${worker.url}/rooms/stand-in`);

    // A first hello: the history and the room's recent events (a command,
    // an answer being written), shown as live ones are.
    const first = await socket(1);
    assert.doesNotMatch(first.url, /since/);
    const writing = { type: "delta", seq: 7, exchange: "x1", round: 1, text: "Let me" };
    send(first, hello(7, false, [{ role: "user", userId: "ana", text: "hi", ts: 1764400000000 }], [...command(4, "c1", "echo one", "one"), writing]));
    await statusIs(page, "live");
    await shows("someone ran: echo one\none\n[exit 0]");
    assert.equal(await page.textContent("#chat"), "ana: hiagent: Let me");
    send(first, { type: "pong" }, { type: "heartbeat", seq: 7 });
    await until("the ack", () => first.sent.includes('{"type":"ack","seq":7}'), 5_000);
    // A heartbeat is answered even when nothing new was shown since.
    const acks = () => first.sent.filter((m) => m === '{"type":"ack","seq":7}').length;
    const acked = acks();
    send(first, { type: "heartbeat", seq: 7 });
    await until("the heartbeat's answer", () => acks() > acked, 5_000);

    // Too slow (4008): back with since; a resumed hello keeps what is shown.
    first.ws.close({ code: 4008, reason: "too slow" });
    const second = await socket(2);
    assert.match(second.url, /\?since=7$/);
    send(second, hello(7, true), ...command(8, "c2", "echo two", "two"));
    await shows("someone ran: echo one\none\n[exit 0]\nsomeone ran: echo two\ntwo\n[exit 0]");
    assert.equal(await page.textContent("#chat"), "ana: hiagent: Let me");

    // Resumed too late: a gap, and the hello after it is the whole truth.
    send(second, { type: "gap", seq: 3, since: 10 }, hello(3, false, [], command(1, "c9", "echo nine", "nine")));
    await shows("someone ran: echo nine\nnine\n[exit 0]");
    assert.equal(await page.textContent("#chat"), "");

    // Gone quiet (4408): back with since again; then the room is deleted (4410): no more.
    second.ws.close({ code: 4408, reason: "stopped answering" });
    const third = await socket(3);
    assert.match(third.url, /\?since=3$/);
    send(third, hello(3, true), { type: "closed", seq: 3, reason: "deleted" });
    third.ws.close({ code: 4410, reason: "deleted" });
    await statusIs(page, "the room was deleted; reload the page to start it afresh");
    await sleep(1500);
    assert.equal(feeds.length, 3, "no reconnect to a deleted room");
    assert.deepEqual(errors, []);
    await context.close();
  });

  test("the page pings its feed every 25 s while it is open", async () => {
    const context = await browser.newContext();
    const sent = [];
    await context.routeWebSocket(/\/live(\?|$)/, (ws) => {
      ws.onMessage((m) => sent.push(m));
      ws.send(JSON.stringify({ type: "hello", seq: 0, resumed: false, room: "r", history: [], recent: [], role: "owner", invites: false }));
    });
    const page = await context.newPage();
    await page.clock.install();
    await page.goto(`${worker.url}/rooms/pinged`);
    await statusIs(page, "live");
    await page.clock.runFor(24_000);
    assert.deepEqual(sent.filter((m) => m.includes("ping")), []);
    await page.clock.runFor(26_000);
    assert.deepEqual(sent.filter((m) => m.includes("ping")), ['{"type":"ping"}', '{"type":"ping"}']);
    await context.close();
  });

  test("a deleted room says so on the page, which stops reconnecting", async () => {
    const room = randomUUID();
    const { page } = await open(room, "ana");
    assert.equal((await worker.api("DELETE", `/api/rooms/${room}`)).status, 200);
    await page.waitForFunction(() => document.getElementById("status").textContent.includes("the room was deleted"));
    assert.match(await page.textContent("#chat"), /the room was deleted: its history and files are gone/);
    await page.waitForFunction(() => window.sockets[0].closes.length === 1, null, { timeout: 10_000 });
    assert.deepEqual((await sockets(page))[0].closes, [4410]);
    await sleep(1500);
    assert.equal((await sockets(page)).length, 1, "no reconnect to a deleted room");
  });

  test("the page's responses keep their security headers and send no referrer", async () => {
    for (const route of ["/", "/rooms/r-1", ...Object.values(pageAssets())]) {
      const res = await fetch(worker.url + route);
      assert.equal(res.headers.get("referrer-policy"), "no-referrer", route);
      assert.equal(res.headers.get("x-content-type-options"), "nosniff", route);
      assert.match(res.headers.get("content-security-policy"), /frame-ancestors 'none'/, route);
    }
  });

  test("a page on another origin can neither run a command nor watch the room", async () => {
    const room = randomUUID();
    const target = `${worker.url}/api/rooms/${room}`;
    // The attack of a cross-site page: a "simple" POST (text/plain, no
    // preflight) and a WebSocket, both of which browsers send to any origin.
    const attack = `<!doctype html><script>
      window.result = (async () => {
        const post = (route, body) => fetch(${JSON.stringify(target)} + route, { method: "POST", mode: "no-cors", body }).then(() => "sent", String);
        const sent = [await post("/sandbox/exec", '{"cmd": "touch pwned-exec"}'), await post("/message", '{"text": "raw <run>touch pwned-run</run>"}')];
        const watched = await new Promise((resolve) => {
          const ws = new WebSocket(${JSON.stringify(`${target.replace(/^http/, "ws")}/live`)}, ["duet.v1"]);
          ws.onopen = () => resolve("opened");
          ws.onclose = (e) => resolve("refused " + e.code);
        });
        return { sent, watched };
      })();
    </script>`;
    const other = http.createServer((req, res) => res.writeHead(200, { "content-type": "text/html" }).end(attack));
    await new Promise((resolve) => other.listen(0, "127.0.0.1", resolve));
    const { port } = other.address();
    try {
      assert.equal((await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "echo mine > kept" })).status, 200);
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(`http://127.0.0.1:${port}/`);
      const result = await page.evaluate(() => window.result);
      await context.close();
      assert.deepEqual(result, { sent: ["sent", "sent"], watched: "refused 1006" });
      const ls = await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "ls" });
      assert.equal(ls.json.result.stdout, "kept\n", "no command of the other page ran");
      assert.deepEqual((await worker.api("GET", `/api/rooms/${room}/messages`)).json.messages, []);
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });
});

describe("the web page with DUET_API_TOKEN", () => {
  const TOKEN = "page-t0ken";
  let sandboxd, worker, browser;
  before(async () => {
    sandboxd = await startSandboxd();
    worker = await startWorker({ vars: { DUET_API_TOKEN: TOKEN, SANDBOX_URL: sandboxd.url } });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
  });
  after(async () => {
    await browser?.close();
    await worker?.stop();
    await sandboxd?.stop();
  });

  /**
   * A page of `url` (by default a new room's) whose prompts `answer(message)`
   * answers (undefined: dismissed); `stored` is a token already in the tab.
   */
  async function open(answer, stored, url = `${worker.url}/rooms/${randomUUID()}`) {
    const context = await browser.newContext();
    await context.addInitScript(recordSockets);
    if (stored) await context.addInitScript((t) => sessionStorage.getItem("duet-token") || sessionStorage.setItem("duet-token", t), stored);
    const page = await context.newPage();
    const prompts = [], errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("dialog", async (dialog) => {
      prompts.push(dialog.message());
      const given = answer(dialog.message(), prompts.length);
      await (given === undefined ? dialog.dismiss() : dialog.accept(given));
    });
    await page.goto(url);
    return { page, prompts, errors };
  }

  test("the page asks for the token when the worker refuses it, and is then let in", async () => {
    const { page, prompts } = await open(() => TOKEN);
    await statusIs(page, "live");
    assert.deepEqual(prompts, ["This Duet needs its API token:"]);
    assert.equal(await page.evaluate(() => sessionStorage.getItem("duet-token")), TOKEN);
    const socketsSeen = await sockets(page);
    assert.deepEqual(socketsSeen.map((s) => s.opened), [false, true], "refused once, then let in");
  });

  test("a wrong stored token is not retried silently: the page asks for a new one", async () => {
    const { page, prompts } = await open(() => TOKEN, "wrong-token");
    await statusIs(page, "live");
    assert.deepEqual(prompts, ["The API token was refused. Enter the right one:"]);
    assert.equal(await page.evaluate(() => sessionStorage.getItem("duet-token")), TOKEN, "the wrong token is replaced");
  });

  test("an owner's watcher link: the second page sees the room live and cannot type; revoking ends it", async () => {
    const owner = await open(() => undefined, TOKEN);
    await statusIs(owner.page, "live");
    const room = new URL(owner.page.url()).pathname.split("/").pop();
    await owner.page.fill("#name", "olga");
    await owner.page.getByLabel("Invitee's name").fill("wanda");
    await owner.page.getByRole("button", { name: "Watcher link" }).click();
    await owner.page.waitForFunction(() => !document.getElementById("link").hidden);
    const link = await owner.page.inputValue("#link");
    assert.match(link, new RegExp(`^${worker.url}/rooms/${room}#token=duet1\\.`));

    const watcher = await open(() => undefined, undefined, link);
    await statusIs(watcher.page, "live");
    assert.equal(watcher.page.url(), `${worker.url}/rooms/${room}`, "the token is taken off the address bar");
    assert.equal(await watcher.page.evaluate(() => sessionStorage.getItem("duet-token")), link.split("#token=")[1]);
    await watcher.page.waitForFunction(() => document.getElementById("role").textContent === "you: watcher");
    assert.equal(await watcher.page.locator("input:visible, button[type=submit]:visible").count(), 0, "nothing to type in or send");
    // The worker refuses it too.
    const exec = await watcher.page.evaluate(async (path) => (await fetch(path, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${sessionStorage.getItem("duet-token")}` }, body: '{"cmd":"touch x"}' })).status, `/api/rooms/${room}/sandbox/exec`);
    assert.equal(exec, 403);

    await owner.page.waitForFunction(() => document.getElementById("present").textContent.includes("wanda (watcher)"));
    assert.match(await owner.page.textContent("#present"), /olga \(owner\)/);
    await owner.page.getByLabel("Shell command").fill("echo seen-by-the-watcher");
    await owner.page.keyboard.press("Enter");
    await watcher.page.waitForFunction(() => terminalText().includes("seen-by-the-watcher\n[exit 0]"));

    // A writer link brings someone who can.
    await owner.page.getByRole("button", { name: "Writer link" }).click();
    await owner.page.waitForFunction((old) => document.getElementById("link").value !== old, link);
    const writer = await open(() => undefined, undefined, await owner.page.inputValue("#link"));
    await writer.page.waitForFunction(() => document.getElementById("role").textContent === "you: writer");
    await writer.page.getByLabel("Shell command").fill("echo from-the-writer");
    await writer.page.keyboard.press("Enter");
    await owner.page.waitForFunction(() => terminalText().includes("from-the-writer\n[exit 0]"));
    assert.equal(await writer.page.locator("#invite").isVisible(), false, "only an owner invites");

    await owner.page.getByRole("button", { name: "Revoke all links" }).click();
    for (const invited of [watcher, writer]) {
      await statusIs(invited.page, "your link was revoked; ask the room's owner for a new one");
    }
    await statusIs(owner.page, "every invite link was revoked");
    assert.deepEqual((await sockets(owner.page)).map((s) => s.closes), [[]], "the owner's own socket stays");
    assert.deepEqual([owner.prompts, watcher.prompts, writer.prompts], [[], [], []]);
  });

  test("a room that asks: the agent's command waits on every page until a writer approves it", async () => {
    const owner = await open(() => undefined, TOKEN);
    await statusIs(owner.page, "live");
    const room = new URL(owner.page.url()).pathname.split("/").pop();
    const api = (method, route, body) => worker.api(method, `/api/rooms/${room}${route}`, body, { authorization: `Bearer ${TOKEN}` });
    const invited = async (role, name) => {
      const { link } = await invite(bearer(worker.url, TOKEN), room, role, { name });
      const page = await open(() => undefined, undefined, link);
      await page.page.waitForFunction((r) => document.getElementById("role").textContent === `you: ${r}`, role);
      return page;
    };
    const writer = await invited("writer", "bo");
    const mode = (p) => p.page.evaluate(() => [document.getElementById("mode").value, document.getElementById("mode").disabled]);
    const asked = (p) => p.page.waitForFunction(() => document.getElementById("asks").textContent.includes("echo approved-$((6*7))"));

    // The pages that are there hear of the policy and the waiting command
    // on the feed; the watcher, who comes later, asks for them on joining.
    const policy = await api("PUT", "/policy", { agentCommands: "ask", allow: ["git status"] });
    assert.equal(policy.status, 200, policy.text);
    for (const { page } of [owner, writer]) await page.waitForFunction(() => document.getElementById("mode").value === "ask");
    await owner.page.fill("#name", "olga");
    await owner.page.getByLabel("Message to the agent").fill("steps echo approved-$((6*7))");
    await owner.page.keyboard.press("Enter");
    await asked(owner);
    await asked(writer);
    const watcher = await invited("watcher", "wanda");
    const pages = [owner, writer, watcher];
    await asked(watcher);
    await watcher.page.waitForFunction(() => document.getElementById("mode").value === "ask");
    assert.deepEqual(await Promise.all(pages.map(mode)), [["ask", false], ["ask", true], ["ask", true]], "only the owner may change it");
    assert.match(await watcher.page.textContent("#rules"), /allow:git status deny: none/);
    assert.match(await watcher.page.textContent("#asks"), /asked by .+, expires at /);
    assert.equal(await watcher.page.locator("#asks button").count(), 0, "a watcher cannot decide");
    assert.equal(await writer.page.locator("#asks button").count(), 2);
    assert.doesNotMatch(await terminal(writer.page), /approved-42/, "nothing ran yet");

    await writer.page.getByRole("button", { name: "Approve" }).click();
    await watcher.page.waitForFunction(() => document.getElementById("asks").textContent.includes("approved by bo"));
    for (const { page } of pages) {
      await page.waitForFunction(() => terminalText().includes("approved-42\n[exit 0]"), null, { timeout: 10_000 });
      await page.waitForFunction(() => document.getElementById("chat").textContent.includes("saw: approved-42"), null, { timeout: 10_000 });
    }
    // The decided entry goes after a moment.
    await owner.page.waitForFunction(() => document.querySelectorAll("#asks li").length === 0, null, { timeout: 10_000 });

    // Two commands of one answer: while the second waits, the owner's page,
    // which does not hear of decisions now, decides the first too late.
    await owner.page.evaluate(() => {
      const { socket } = window.sockets.at(-1);
      const shown = socket.onmessage;
      socket.onmessage = (m) => JSON.parse(m.data).type === "decided" || shown(m);
    });
    await owner.page.getByLabel("Message to the agent").fill("raw Two. <run>echo one</run><run>echo two</run>");
    await owner.page.keyboard.press("Enter");
    const entry = (p, command) => p.page.locator("#asks li", { hasText: command });
    await entry(owner, "echo two").waitFor();
    await entry(writer, "echo one").getByRole("button", { name: "Approve" }).click();
    await entry(writer, "echo one").getByText("approved by bo").waitFor();
    await entry(owner, "echo one").getByRole("button", { name: "Approve" }).click();
    await entry(owner, "echo one").getByText("this command was already approved by bo").waitFor();
    assert.equal(await owner.page.textContent("#status"), "live", "a note, not an error");
    await entry(writer, "echo two").getByRole("button", { name: "Deny" }).click();
    await entry(watcher, "echo two").getByText("denied by bo").waitFor();
    await watcher.page.waitForFunction(() => document.getElementById("chat").textContent.includes("Done."), null, { timeout: 10_000 });
    assert.match(await terminal(watcher.page), /agent ran: echo one\none\n\[exit 0\]$/, "the denied one did not run");

    await owner.page.selectOption("#mode", "off");
    await writer.page.waitForFunction(() => document.getElementById("mode").value === "off");
    assert.equal((await api("GET", "/policy")).json.agentCommands, "off");
    assert.deepEqual(pages.flatMap((p) => [...p.prompts, ...p.errors]), []);
  });

  /** A page of `room` opened by a `role` invite link in `name`'s name, once the feed says its role. */
  async function invited(room, role, name) {
    const { link } = await invite(bearer(worker.url, TOKEN), room, role, { name });
    const opened = await open(() => undefined, undefined, link);
    await opened.page.waitForFunction((r) => document.getElementById("role").textContent === `you: ${r}`, role);
    return opened;
  }
  /** The room's job routes, as the service token. */
  const jobsOf = (room) => (method, route = "", body) => worker.api(method, `/api/rooms/${room}/jobs${route}`, body, { authorization: `Bearer ${TOKEN}` });
  /** Job `name`'s entry in a page's list of jobs; its state's text. */
  const jobEntry = (page, name) => page.locator("#jobs li", { hasText: name });
  const stateOf = (page, name) => jobEntry(page, name).locator(".state").textContent();
  const jobText = (page) => page.evaluate(() => terminalText("job-term"));
  /** What job `name`'s entry says: its name, command, state and who started it when (the time as a `T`). */
  const entryOf = (page, name) =>
    jobEntry(page, name).evaluate((li) => [...li.querySelectorAll("b, code, .state, .muted")].map((e) => e.textContent.replace(/ at \d.*$/, " at T")));

  test("a writer's page lists the room's jobs live: a job's output as it prints, its exit; a stubborn one stopped by its button", async () => {
    const room = randomUUID();
    const api = jobsOf(room);
    const writer = await invited(room, "writer", "bo");
    const { page } = writer;
    assert.equal(await page.locator("#no-jobs").textContent(), "No jobs yet");
    assert.ok(await page.locator("#no-jobs").isVisible());
    assert.equal(await page.locator("#jobs li").count(), 0);

    const cmd = "for i in 1 2 3; do echo tick $i; sleep 1; done";
    const started = await api("POST", "", { cmd, name: "ticker", userId: "ana" });
    assert.equal(started.status, 201, started.text);
    // The page selects the first job that comes: its output shows at once.
    await page.waitForFunction(() => terminalText("job-term").split("\n").includes("tick 1"), null, { timeout: 10_000 });
    const first = Date.now();
    assert.equal(await stateOf(page, "ticker"), "running");
    assert.doesNotMatch(await jobText(page), /tick 3/, "seen before the job's end");
    assert.equal(await page.locator("#no-jobs").isVisible(), false);
    assert.equal(await page.textContent("#job-title"), "Output of ticker");
    assert.equal(await jobEntry(page, "ticker").getAttribute("class"), "shown");
    await page.waitForFunction(() => terminalText("job-term").split("\n").includes("tick 3"), null, { timeout: 10_000 });
    assert.ok(Date.now() - first >= 1_500, `tick 1 to tick 3 in ${Date.now() - first} ms: the lines stream`);
    await page.waitForFunction(() => document.querySelector("#jobs .state")?.textContent === "exited (code 0)", null, { timeout: 10_000 });
    await page.waitForFunction(() => terminalText("job-term").endsWith("]"));
    assert.equal(await jobText(page), `$ ${cmd}\ntick 1\ntick 2\ntick 3\n[exited, code 0]`);
    assert.deepEqual(await entryOf(page, "ticker"), ["ticker", cmd, "exited (code 0)", "started by ana at T"]);
    assert.equal(await jobEntry(page, "ticker").getByRole("button", { name: "Stop" }).count(), 0, "an ended job has no stop button");
    // xterm.js draws the job's rows in its own box, once it is in view.
    await page.locator("#job-term").scrollIntoViewIfNeeded();
    await page.waitForFunction(() => [...document.querySelectorAll("#job-term .xterm-rows > div")].some((d) => d.textContent.trim() === "tick 3"));
    assert.equal(await page.locator("#term .xterm-rows").textContent().then((t) => t.includes("tick")), false, "not in the room's terminal");

    // A job that ignores SIGTERM: the button waits for it, killed 5 s later.
    const stubborn = await api("POST", "", { cmd: "trap '' TERM; echo ready; while true; do sleep 0.2; done", name: "stubborn" });
    assert.equal(stubborn.status, 201, stubborn.text);
    await jobEntry(page, "stubborn").locator(".state", { hasText: "running" }).waitFor();
    assert.deepEqual(await page.$$eval("#jobs li b", (names) => names.map((n) => n.textContent)), ["stubborn", "ticker"], "running first");
    assert.deepEqual((await entryOf(page, "stubborn")).slice(2), ["running", "started by someone at T"]);
    await jobEntry(page, "stubborn").getByRole("button", { name: "Stop" }).click();
    await jobEntry(page, "stubborn").getByRole("button", { name: "Stopping…" }).waitFor();
    assert.ok(await jobEntry(page, "stubborn").getByRole("button", { name: "Stopping…" }).isDisabled());
    await page.waitForFunction(() => document.querySelector("#jobs li .state")?.textContent.startsWith("stopped"), null, { timeout: 15_000 });
    assert.equal(await stateOf(page, "stubborn"), "stopped (code 137)");
    assert.equal(await page.locator("#jobs button", { hasText: /^Stop/ }).count(), 0, "no job runs");
    assert.deepEqual((await api("GET", `/${stubborn.json.job.id}`)).json.job.state, "stopped");
    // Selected, its output replaces the other's.
    await jobEntry(page, "stubborn").locator(".pick").click();
    await page.waitForFunction(() => terminalText("job-term").endsWith("[stopped, code 137]"));
    assert.equal(await jobText(page), "$ trap '' TERM; echo ready; while true; do sleep 0.2; done\nready\n[stopped, code 137]");
    assert.equal(await page.textContent("#job-title"), "Output of stubborn");
    assert.equal(await jobEntry(page, "stubborn").locator(".pick").getAttribute("aria-pressed"), "true");
    assert.deepEqual([...writer.prompts, ...writer.errors], []);
  });

  test("a watcher's page shows the room's jobs and their output, on joining and live, with no stop button", async () => {
    const room = randomUUID();
    const api = jobsOf(room);
    const server = (await api("POST", "", { cmd: "echo ready; sleep 300", name: "server", userId: "ana" })).json.job;
    await until("the job's first line", async () => (await api("GET", `/${server.id}`)).json.job.output === "ready\n", 10_000);
    const watcher = await invited(room, "watcher", "wanda");
    const writer = await invited(room, "writer", "bo");
    const { page } = watcher;
    // Listed on joining (GET .../jobs), selected, its output asked for (GET .../jobs/{id}).
    await page.waitForFunction(() => terminalText("job-term") === "$ echo ready; sleep 300\nready", null, { timeout: 10_000 });
    assert.deepEqual(await entryOf(page, "server"), ["server", "echo ready; sleep 300", "running", "started by ana at T"]);
    assert.equal(await page.locator("#jobs button", { hasText: /^Stop/ }).count(), 0, "a watcher cannot stop a job");
    assert.equal(await jobEntry(writer.page, "server").getByRole("button", { name: "Stop" }).count(), 1, "a writer can");

    // A job started now comes live; it does not take the selected one's place.
    const late = await api("POST", "", { cmd: "echo late", userId: "bo" });
    assert.equal(late.status, 201, late.text);
    await jobEntry(page, "echo late").locator(".state", { hasText: "exited (code 0)" }).waitFor({ timeout: 10_000 });
    assert.equal(await jobText(page), "$ echo ready; sleep 300\nready");
    assert.equal(await page.locator("#jobs button", { hasText: /^Stop/ }).count(), 0);

    // Stopped while the watcher is offline: back online, it shows so.
    await page.context().setOffline(true);
    await statusIs(page, "offline; reconnecting…");
    const stopped = await api("DELETE", `/${server.id}`);
    assert.deepEqual([stopped.status, stopped.json.job.state, stopped.json.job.exitCode], [200, "stopped", 143]);
    await page.context().setOffline(false);
    await statusIs(page, "live");
    await page.waitForFunction(() => terminalText("job-term").endsWith("[stopped, code 143]"), null, { timeout: 10_000 });
    assert.equal(await jobText(page), "$ echo ready; sleep 300\nready\n[stopped, code 143]");
    assert.equal(await stateOf(page, "server"), "stopped (code 143)");
    await writer.page.waitForFunction(() => document.querySelectorAll("#jobs button.quiet").length === 0, null, { timeout: 10_000 });

    await jobEntry(page, "echo late").locator(".pick").click();
    await page.waitForFunction(() => terminalText("job-term") === "$ echo late\nlate\n[exited, code 0]");
    assert.deepEqual(await entryOf(page, "echo late"), ["echo late", "exited (code 0)", "started by bo at T"]);
    assert.deepEqual([watcher, writer].flatMap((p) => [...p.prompts, ...p.errors]), []);
  });

  /** The shared terminal's text on a page, one line per line; a wait until one of its lines is `line`. */
  const shellText = (page) => page.evaluate(() => terminalText("shell"));
  const shellLine = (page, line) => page.waitForFunction((l) => terminalText("shell").split("\n").includes(l), line, { timeout: 10_000 });
  /** The frames a page sent on its shared terminal's sockets, parsed. */
  const shellSent = (page) => page.evaluate(() => window.termSockets.flatMap((s) => s.sent.map((f) => JSON.parse(f))));

  test("the shared terminal: a writer's page types into the room's shell and every page sees it; a watcher's keys send nothing", async () => {
    const room = randomUUID();
    const ana = await invited(room, "writer", "ana");
    const bo = await invited(room, "writer", "bo");
    const wes = await invited(room, "watcher", "wes");
    const pages = [ana, bo, wes];
    for (const { page } of pages) await page.waitForFunction(() => window.termSockets[0]?.opened && terminalText("shell") !== "", null, { timeout: 10_000 });
    assert.equal(await ana.page.textContent("#shell-note"), "everyone in the room sees what you type");
    assert.equal(await wes.page.textContent("#shell-note"), "watching: only writers type");

    // Ana types; bo's page says so while she does.
    const boSeesTyping = bo.page.waitForFunction(() => document.getElementById("typing").textContent === "ana is typing…" && document.getElementById("typing").classList.contains("on"), null, { timeout: 10_000 });
    await ana.page.click("#shell");
    await ana.page.keyboard.type("echo term-$((6*7))");
    await ana.page.keyboard.press("Enter");
    for (const { page } of pages) await shellLine(page, "term-42");
    await boSeesTyping;
    // Focused, her page sent its box's size first; the shell has it.
    const sent = await shellSent(ana.page);
    const resize = sent.find((f) => f.type === "resize");
    assert.ok(resize && resize.cols > 20 && resize.rows > 5, JSON.stringify(sent.slice(0, 3)));
    assert.ok(sent.findIndex((f) => f.type === "resize") < sent.findIndex((f) => f.type === "input"), "the size before the first key");
    assert.equal(sent.filter((f) => f.type === "input").map((f) => f.data).join(""), "echo term-$((6*7))\r");
    await ana.page.keyboard.type("stty size");
    await ana.page.keyboard.press("Enter");
    await shellLine(bo.page, `${resize.rows} ${resize.cols}`);

    // The watcher's keys: nothing sent, nothing reaches the shell, its socket stays open.
    await wes.page.click("#shell");
    await wes.page.keyboard.type("echo from-watcher");
    await wes.page.keyboard.press("Enter");
    await sleep(1000);
    assert.ok(!(await shellText(ana.page)).includes("from-watcher"), "nothing the watcher typed reached the shell");
    assert.deepEqual((await shellSent(wes.page)).filter((f) => f.type !== "ping"), [], "the watcher's page sent nothing");
    assert.deepEqual(await wes.page.evaluate(() => window.termSockets.map((s) => [s.socket.readyState, s.closes])), [[WebSocket.OPEN, []]]);
    // ...and still shows what the writers type.
    await bo.page.click("#shell");
    await bo.page.keyboard.type("echo from-bo");
    await bo.page.keyboard.press("Enter");
    await shellLine(wes.page, "from-bo");
    assert.deepEqual(pages.flatMap((p) => [...p.prompts, ...p.errors]), []);
  });

  test("the shared terminal comes back when its socket drops", async () => {
    const room = randomUUID();
    const ana = await invited(room, "writer", "ana");
    const { page } = ana;
    await page.waitForFunction(() => window.termSockets[0]?.opened, null, { timeout: 10_000 });
    await page.click("#shell");
    await page.keyboard.type("echo before-$((1+1))");
    await page.keyboard.press("Enter");
    await shellLine(page, "before-2");
    await page.evaluate(() => window.termSockets[0].socket.close());
    await page.waitForFunction(() => window.termSockets.length === 2 && window.termSockets[1].opened, null, { timeout: 10_000 });
    await page.waitForFunction(() => document.getElementById("shell-note").textContent === "everyone in the room sees what you type");
    // The new socket's screen redraws what was there.
    await shellLine(page, "before-2");
    await page.keyboard.type("echo after-$((2+2))");
    await page.keyboard.press("Enter");
    await shellLine(page, "after-4");
    assert.deepEqual([...ana.prompts, ...ana.errors], []);
  });

  test("the command log names who ran each command: a person's exec, a writer's page, the agent", async () => {
    const room = randomUUID();
    const bo = await invited(room, "writer", "bo");
    const { page } = bo;
    const exec = await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "echo by-ana", userId: "ana" }, { authorization: `Bearer ${TOKEN}` });
    assert.equal(exec.status, 200, exec.text);
    await page.waitForFunction(() => terminalText().includes("by-ana\n[exit 0]"), null, { timeout: 10_000 });
    await page.getByLabel("Shell command").fill("echo by-bo");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => terminalText().includes("by-bo\n[exit 0]"), null, { timeout: 10_000 });
    await page.getByLabel("Message to the agent").fill("steps echo by-the-agent");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => terminalText().includes("by-the-agent\n[exit 0]"), null, { timeout: 10_000 });
    assert.equal(await terminal(page), ["ana ran: echo by-ana", "by-ana", "[exit 0]", "bo ran: echo by-bo", "by-bo", "[exit 0]", "agent ran: echo by-the-agent", "by-the-agent", "[exit 0]"].join("\n"));
    assert.equal(await shellText(page).then((t) => t.includes("by-ana")), false, "the command log is not the shared terminal");
    assert.deepEqual([...bo.prompts, ...bo.errors], []);
  });

  /** The room's file routes, as the service token: raw bytes in, status and bytes (and JSON) out. */
  const filesOf = (room) => async (method, path, body) => {
    const headers = { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/octet-stream" }) };
    const res = await fetch(`${worker.url}/api/rooms/${room}/files?path=${encodeURIComponent(path)}`, { method, headers, body });
    const bytes = Buffer.from(await res.arrayBuffer());
    return { status: res.status, bytes, text: bytes.toString() };
  };
  /** Entry `name` of a page's file tree (its button), and the names the tree shows, in order, folders as `▸ name/`. */
  const fileEntry = (page, name) => page.locator("#tree .entry", { hasText: new RegExp(`^(▸ |▾ )?${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/?$`) });
  const treeOf = (page) => page.$$eval("#tree .entry", (entries) => entries.map((e) => e.textContent));
  const treeShows = (page, names) => page.waitForFunction((n) => JSON.stringify([...document.querySelectorAll("#tree .entry")].map((e) => e.textContent)) === n, JSON.stringify(names), { timeout: 10_000 });
  /** What the file view shows: its title, its note, and its text (null when no text is shown). */
  const fileView = (page) => page.evaluate(() => [document.getElementById("file-title").textContent, document.getElementById("file-note").textContent, document.getElementById("file-text").hidden ? null : document.getElementById("file-text").textContent]);
  const viewShows = (page, title, note) => page.waitForFunction(([t, n]) => document.getElementById("file-title").textContent === t && document.getElementById("file-note").textContent === n, [title, note], { timeout: 10_000 });
  /**
   * What the download link saves, as the browser saves it: its address once
   * clicked, the file's name, its bytes. (The page cannot read its own Blob
   * URL with fetch: its Content-Security-Policy allows connections to 'self'
   * only, which a `blob:` URL is not.)
   */
  async function downloaded(page) {
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "Download" }).click()]);
    const href = await page.getAttribute("#file-download", "href");
    return { href, name: download.suggestedFilename(), bytes: fs.readFileSync(await download.path()) };
  }

  test("a writer's page shows the workspace live: a file's text, a folder opened, a binary file, downloads, uploads", async () => {
    const room = randomUUID();
    const files = filesOf(room);
    const writer = await invited(room, "writer", "bo");
    const { page } = writer;
    await page.locator("#no-files", { hasText: "The workspace is empty" }).waitFor({ timeout: 10_000 });
    assert.equal(await page.locator("#tree li").count(), 0);
    assert.equal(await page.textContent("#upload-to"), "Upload into the top folder:");

    // Written through the API: it comes live, and shows as text when selected.
    assert.equal((await files("PUT", "notes.txt", "hello\nworld\n")).status, 200);
    await treeShows(page, ["notes.txt"]);
    assert.equal(await page.locator("#no-files").isVisible(), false);
    assert.equal(await page.locator("#tree li", { hasText: "notes.txt" }).locator(".muted").textContent(), "12 bytes");
    await fileEntry(page, "notes.txt").click();
    await viewShows(page, "notes.txt", "12 bytes");
    assert.deepEqual(await fileView(page), ["notes.txt", "12 bytes", "hello\nworld\n"]);
    assert.equal(await fileEntry(page, "notes.txt").getAttribute("aria-pressed"), "true");
    const small = await downloaded(page);
    assert.match(small.href, /^blob:/);
    assert.equal(small.name, "notes.txt");
    assert.equal(small.bytes.toString(), "hello\nworld\n");
    // Changed while selected: shown again.
    assert.equal((await files("PUT", "notes.txt", "changed")).status, 200);
    await viewShows(page, "notes.txt", "7 bytes");
    assert.equal((await fileView(page))[2], "changed");

    // A nested folder: opened level by level, each listing asked for then.
    assert.equal((await files("PUT", "src/lib/util.txt", "export const x = 1;\n")).status, 200);
    await treeShows(page, ["notes.txt", "▸ src/"]);
    await fileEntry(page, "src").click();
    await treeShows(page, ["notes.txt", "▾ src/", "▸ lib/"]);
    assert.equal(await fileEntry(page, "src").getAttribute("aria-expanded"), "true");
    assert.equal(await page.textContent("#upload-to"), "Upload into src/:");
    await fileEntry(page, "lib").click();
    await treeShows(page, ["notes.txt", "▾ src/", "▾ lib/", "util.txt"]);
    await fileEntry(page, "util.txt").click();
    await viewShows(page, "src/lib/util.txt", "20 bytes");
    assert.equal((await fileView(page))[2], "export const x = 1;\n");
    // A file written into an open folder comes live.
    assert.equal((await files("PUT", "src/lib/more.txt", "more")).status, 200);
    await treeShows(page, ["notes.txt", "▾ src/", "▾ lib/", "more.txt", "util.txt"]);

    // Binary: a NUL, or bytes that are not UTF-8; its download is its bytes exactly.
    const binary = Buffer.from(Array.from({ length: 300 }, (_, i) => i % 256));
    assert.equal((await files("PUT", "blob.bin", binary)).status, 200);
    assert.equal((await files("PUT", "latin1.txt", Buffer.from("caf\xe9", "latin1"))).status, 200);
    assert.equal((await files("PUT", "nul.txt", "plain\0text")).status, 200);
    await fileEntry(page, "blob.bin").click();
    await viewShows(page, "blob.bin", "Binary file, 300 bytes: not shown");
    assert.equal((await fileView(page))[2], null, "no text shown");
    const blob = await downloaded(page);
    assert.equal(blob.name, "blob.bin");
    assert.ok(blob.bytes.equals(binary), "every byte");
    await fileEntry(page, "latin1.txt").click();
    await viewShows(page, "latin1.txt", "Binary file, 4 bytes: not shown");
    await fileEntry(page, "nul.txt").click();
    await viewShows(page, "nul.txt", "Binary file, 10 bytes: not shown");

    // Larger than what is shown: its first 256 KiB (a character cut in two
    // at the end is left out), and the link asks for all its bytes.
    const large = Buffer.from(`${"a".repeat(256 * 1024 - 1)}é${"z".repeat(40_000)}`);
    assert.equal((await files("PUT", "large.txt", large)).status, 200);
    await fileEntry(page, "large.txt").click();
    await viewShows(page, "large.txt", `showing the first 256 KiB of ${large.length.toLocaleString("en")} bytes`);
    assert.equal((await fileView(page))[2], "a".repeat(256 * 1024 - 1));
    assert.equal(await page.getAttribute("#file-download", "href"), "#", "its bytes are asked for when it is clicked");
    const whole = await downloaded(page);
    assert.match(whole.href, /^blob:/);
    assert.equal(whole.name, "large.txt");
    assert.ok(whole.bytes.equals(large), "the download is the whole file");

    // Deleted while selected: said so, and gone from the tree.
    await fileEntry(page, "notes.txt").click();
    await viewShows(page, "notes.txt", "7 bytes");
    assert.equal((await files("DELETE", "notes.txt")).status, 200);
    await viewShows(page, "notes.txt", "This file was deleted.");
    assert.equal((await fileView(page))[2], null);
    assert.equal(await page.locator("#file-download").isVisible(), false);
    await treeShows(page, ["blob.bin", "large.txt", "latin1.txt", "nul.txt", "▾ src/", "▾ lib/", "more.txt", "util.txt"]);

    // An upload goes into the folder of the selected file.
    await fileEntry(page, "util.txt").click();
    assert.equal(await page.textContent("#upload-to"), "Upload into src/lib/:");
    await page.setInputFiles("#upload-file", { name: "up.txt", mimeType: "text/plain", buffer: Buffer.from("uploaded <b>bytes</b>\n") });
    await page.locator("#files-note", { hasText: "uploaded src/lib/up.txt (22 bytes)" }).waitFor({ timeout: 10_000 });
    assert.equal((await files("GET", "src/lib/up.txt")).text, "uploaded <b>bytes</b>\n");
    await treeShows(page, ["blob.bin", "large.txt", "latin1.txt", "nul.txt", "▾ src/", "▾ lib/", "more.txt", "up.txt", "util.txt"]);
    // Refused: the worker's error is shown (a file where a folder is, 409).
    await fileEntry(page, "lib").click();
    await treeShows(page, ["blob.bin", "large.txt", "latin1.txt", "nul.txt", "▾ src/", "▸ lib/"]);
    assert.equal(await page.textContent("#upload-to"), "Upload into src/:");
    await page.setInputFiles("#upload-file", { name: "lib", mimeType: "text/plain", buffer: Buffer.from("not a folder") });
    await page.locator("#files-note.bad", { hasText: "src/lib is a directory" }).waitFor({ timeout: 10_000 });
    // Over 8 MiB: refused before it is sent.
    await page.setInputFiles("#upload-file", { name: "huge.bin", mimeType: "application/octet-stream", buffer: Buffer.alloc(8 * 1024 * 1024 + 1) });
    await page.locator("#files-note.bad", { hasText: "huge.bin is 8,388,609 bytes: an upload may be 8 MiB at most" }).waitFor();
    assert.equal((await files("GET", "src/huge.bin")).status, 404);
    assert.equal(await page.textContent("#status"), "live");
    assert.deepEqual([...writer.prompts, ...writer.errors], []);
  });

  test("a watcher's page shows the files and their text, HTML as text, links as links, and no upload", async () => {
    const room = randomUUID();
    const files = filesOf(room);
    const html = `<img src=x onerror="window.pwned=1">\n<script>window.pwned=2</script>\n`;
    const evilName = "<img src=x onerror=window.pwned=3>";
    assert.equal((await files("PUT", "page.html", html)).status, 200);
    assert.equal((await files("PUT", "docs/guide.md", "# Guide\n")).status, 200);
    assert.equal((await files("PUT", evilName, "named")).status, 200);
    const ln = await worker.api("POST", `/api/rooms/${room}/sandbox/exec`, { cmd: "ln -s docs docs-link && ln -s / outside" }, { authorization: `Bearer ${TOKEN}` });
    assert.equal(ln.json.result.exitCode, 0, ln.text);

    const watcher = await invited(room, "watcher", "wanda");
    const { page } = watcher;
    await treeShows(page, [evilName, "▸ docs/", "docs-link", "outside", "page.html"]);
    assert.equal(await page.locator("#tree li", { hasText: "docs-link" }).locator(".muted").textContent(), "link");
    assert.equal(await page.locator("#upload").isVisible(), false, "a watcher uploads nothing");
    assert.equal(await page.locator("input:visible").count(), 0);

    await fileEntry(page, "page.html").click();
    await viewShows(page, "page.html", `${Buffer.byteLength(html)} bytes`);
    assert.equal((await fileView(page))[2], html, "the HTML as text");
    const blob = await downloaded(page);
    assert.equal(blob.bytes.toString(), html);
    await fileEntry(page, evilName).click();
    await viewShows(page, evilName, "5 bytes");
    assert.equal(await page.locator("#files img, #tree img, #file-view img, #file-view script").count(), 0);
    assert.equal(await page.evaluate(() => window.pwned), undefined, "nothing of it ran");

    // A folder, and a link to it followed once it answers a folder; a link out is refused.
    await fileEntry(page, "docs").click();
    await treeShows(page, [evilName, "▾ docs/", "guide.md", "docs-link", "outside", "page.html"]);
    await fileEntry(page, "docs-link").click();
    await treeShows(page, [evilName, "▾ docs/", "guide.md", "▾ docs-link/", "guide.md", "outside", "page.html"]);
    await page.locator("#tree li[data-path='docs-link/guide.md'] .entry").click();
    await viewShows(page, "docs-link/guide.md", "8 bytes");
    assert.equal((await fileView(page))[2], "# Guide\n");
    await fileEntry(page, "outside").click();
    await viewShows(page, "outside", "outside leads outside the workspace through a symlink");
    assert.equal((await fileView(page))[2], null);

    // Live for a watcher too.
    await fileEntry(page, "docs-link").click();
    await treeShows(page, [evilName, "▾ docs/", "guide.md", "▸ docs-link/", "outside", "page.html"]);
    assert.equal((await files("PUT", "docs/new.md", "new")).status, 200);
    await treeShows(page, [evilName, "▾ docs/", "guide.md", "new.md", "▸ docs-link/", "outside", "page.html"]);
    assert.equal(await page.textContent("#status"), "live");
    assert.deepEqual([...watcher.prompts, ...watcher.errors], []);
  });

  test("a dismissed prompt stops the retries; the token button tries again", async () => {
    const { page, prompts } = await open((_, n) => (n === 1 ? undefined : TOKEN), "wrong-token");
    await statusIs(page, "not allowed: wrong or missing token");
    await sleep(2000);
    assert.equal((await sockets(page)).length, 1, "no retry with the wrong token");
    assert.equal(prompts.length, 1);
    await page.getByRole("button", { name: "API token…" }).click();
    await statusIs(page, "live");
    assert.deepEqual(prompts, ["The API token was refused. Enter the right one:", "API token:"]);
  });
});
