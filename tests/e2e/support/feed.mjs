// A room's live feed as the tests see it: a watcher that records its
// events (and acknowledges them, unless told not to), and an upgrade sent
// by hand, for the answers a WebSocket client does not show.
import net from "node:net";

/** The frames a watcher gets of its own, outside the room's log. */
export const OWN_FRAMES = new Set(["hello", "gap", "presence", "heartbeat", "closed"]);

/** The events of the room's log among a watcher's frames. */
export const logged = (events) => events.filter((e) => !OWN_FRAMES.has(e.type));

/** A check for a watcher's `until`: the first event of `type`. */
export const first = (type) => (events) => events.find((e) => e.type === type);

/** A check for `w`'s `until`: whether its socket is closing or closed. */
export const closing = (w) => () => w.ws.readyState >= WebSocket.CLOSING || null;

/** The subprotocols a browser offers for the feed with `token` (text or bytes). */
export const protocols = (token) => ["duet.v1", `duet.auth.${Buffer.from(token).toString("base64url")}`];

/**
 * A WebSocket client at `url` offering `offered` that records the JSON
 * frames it gets, in arrival order (each with its arrival time, `at`),
 * tells when it opened and how it closed, and waits on what it recorded:
 * the feed's watchers, the terminal's clients. `heard(ws, frame)` sees each
 * frame as it comes; `said()` says what was recorded when a wait times out.
 */
export function recorder(url, offered, { heard = () => {}, said } = {}) {
  const ws = new WebSocket(url, offered);
  const events = [];
  const waiters = [];
  let closed = null;
  const wake = () => {
    for (const w of [...waiters]) w();
  };
  ws.addEventListener("message", (msg) => {
    const event = JSON.parse(msg.data);
    events.push({ ...event, at: Date.now() });
    heard(ws, event);
    wake();
  });
  const opened = new Promise((resolve, reject) => {
    ws.addEventListener("open", () => resolve(ws.protocol));
    ws.addEventListener("error", () => reject(new Error("the socket failed")));
  });
  ws.addEventListener("close", (e) => {
    closed = { code: e.code, reason: e.reason };
    wake();
  });
  const seen = said ?? (() => `saw ${JSON.stringify(events.map((e) => e.type))}`);
  return {
    ws,
    events,
    opened,
    closed: () => closed,
    /** Resolves once `check(events)` holds. */
    until(check, ms = 10_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out; ${seen()}`)), ms);
        const test = () => {
          const value = check(events);
          if (value) {
            clearTimeout(timer);
            waiters.splice(waiters.indexOf(test), 1);
            resolve(value);
          }
        };
        waiters.push(test);
        test();
      });
    },
    close: () => ws.close(),
  };
}

/**
 * A watcher: its events in arrival order (with arrival times). It acks
 * every eighth event and every heartbeat, unless told not to; `since`
 * resumes after that number.
 */
export function watch(base, room, { protocols: offered = ["duet.v1"], ack = true, since } = {}) {
  const query = since === undefined ? "" : `?since=${since}`;
  const url = `${base.replace(/^http/, "ws")}/api/rooms/${room}/live${query}`;
  const heard = (ws, event) => {
    if (ack && (event.seq % 8 === 0 || event.type === "heartbeat")) ws.send(JSON.stringify({ type: "ack", seq: event.seq }));
  };
  return recorder(url, offered, { heard });
}

/** Sends a WebSocket upgrade by hand to the room's feed, or its `route` (a `Host` in `headers` replaces the real one), and answers the status line and the body. */
export function upgrade(base, room, headers, query = "", route = "live") {
  const { hostname, port } = new URL(base);
  const host = Object.keys(headers).some((name) => name.toLowerCase() === "host") ? [] : [`Host: ${hostname}:${port}`];
  const lines = [`GET /api/rooms/${room}/${route}${query} HTTP/1.1`, ...host, "Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(`${lines.join("\r\n")}\r\n\r\n`));
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk) => {
      answer += chunk;
      const end = answer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = answer.slice(0, end);
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (head.startsWith("HTTP/1.1 101") || answer.length >= end + 4 + length) {
        socket.destroy();
        resolve({ status: Number(head.split(" ")[1]), head, body: answer.slice(end + 4) });
      }
    });
    socket.on("error", reject);
    socket.setTimeout(10_000, () => socket.destroy(new Error("no answer within 10 s")));
  });
}
