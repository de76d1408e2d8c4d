// The egress interceptor: workerd's "proxy-everything" sidecar, which owns
// the network namespace the Sandbox container joins, served in process.
//
// Its control side is an HTTP server on the container's port: `PUT /egress`
// (as strict as proxy-everything: a JSON object with at least one of
// `port`, `internet.enabled`, `dns.allowHostnames`, each of its type, else
// 400; 204 when applied; the sidecar starts with its `--http-egress-port`,
// the internet enabled and every name allowed), `GET /ca`, other methods
// 405, and `CONNECT` with `X-Dst-Addr`, which tunnels to a port of its
// namespace or answers 400 when nothing listens there, as proxy-everything
// does. Its other half, the container's outbound connections, is `dialOut`:
// what the sidecar's TPROXY does with a connection a process in the
// container opens (a `CONNECT` to workerd's egress listener at the bridge
// gateway, on the port `PUT /egress` set), so whether the internet is on is
// decided by workerd, as it is.
import http from "node:http";
import net from "node:net";

import { namespaceOwner } from "./network.mjs";

/** Starts sidecar container `c`: proxy-everything's state at start, and its server. */
export function startSidecar(c) {
  const cmd = c.config.Cmd ?? [];
  const flag = cmd.indexOf("--http-egress-port");
  // proxy-everything's state at start: its flag's port, the internet on, every name allowed.
  c.egress = { port: flag >= 0 ? Number(cmd[flag + 1]) : 49121, internet: { enabled: true }, dns: { allowHostnames: ["*"] } };
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      c.proxyCalls.push(`${req.method} ${req.url}`);
      const path = req.url.split("?")[0];
      if (req.method === "PUT" && path === "/egress") {
        res.writeHead(updateEgress(c, body) ? 204 : 400).end();
      } else if (req.method === "GET" && path === "/ca") {
        res.writeHead(200, { "content-type": "application/x-pem-file" }).end("-----BEGIN CERTIFICATE-----\nZmFrZQ==\n-----END CERTIFICATE-----\n");
      } else if (req.method === "GET" || req.method === "PUT") {
        res.writeHead(404).end();
      } else {
        res.writeHead(405).end();
      }
    });
  });
  server.on("connect", (req, client, head) => {
    const dst = req.headers["x-dst-addr"] ?? req.url;
    c.proxyCalls.push(`CONNECT ${dst}`);
    const match = /^(127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):(\d+)$/.exec(dst);
    const hostPort = match && c.ns.ports.get(Number(match[2]));
    const refuse = () => {
      if (!client.destroyed) client.end("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    };
    if (!hostPort) return refuse();
    const upstream = net.connect(hostPort, "127.0.0.1");
    c.tunnels.add(upstream);
    c.tunnels.add(client);
    upstream.once("connect", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head?.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.once("error", () => (upstream.connecting ? refuse() : client.destroy()));
    client.once("error", () => upstream.destroy());
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => {
      client.destroy();
      c.tunnels.delete(upstream);
      c.tunnels.delete(client);
    });
  });
  server.listen(c.port, "127.0.0.1");
  c.server = server;
}

/**
 * Applies a `PUT /egress` body to the sidecar's configuration as
 * proxy-everything decodes it (absent or null fields change nothing);
 * false for what it answers 400 to, changing nothing.
 */
function updateEgress(c, body) {
  let update;
  try {
    update = JSON.parse(body);
  } catch {
    return false;
  }
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  const given = (v) => v !== undefined && v !== null;
  if (update === null) update = {};
  if (!isObject(update)) return false;
  const { port, internet, dns } = update;
  if (given(port) && !(Number.isInteger(port) && port >= 1 && port <= 65535)) return false;
  if (given(internet) && !(isObject(internet) && (!given(internet.enabled) || typeof internet.enabled === "boolean"))) return false;
  const hostnames = dns?.allowHostnames;
  if (given(dns) && !(isObject(dns) && (!given(hostnames) || (Array.isArray(hostnames) && hostnames.every((h) => typeof h === "string"))))) return false;
  if (!given(port) && !given(internet) && !given(dns)) return false; // "empty payload"
  if (given(port)) c.egress.port = port;
  if (given(internet?.enabled)) c.egress.internet = { enabled: internet.enabled };
  if (given(hostnames)) c.egress.dns = { allowHostnames: hostnames };
  return true;
}

/**
 * A TCP connection a process in container `c` opens to `address`
 * ("host:port"), as the sidecar's TPROXY hands it on: an HTTP `CONNECT`
 * to the gateway (workerd's egress listener) with proxy-everything's
 * headers. Resolves with the socket, paused (bytes after the gateway's
 * head kept for reading), once the gateway answered 2xx; rejects on 400 (the destination
 * refused) and on any other status, as proxy-everything resets the
 * container's connection then.
 */
export function dialOut(engine, c, address) {
  const owner = namespaceOwner(engine, c);
  if (owner.kind !== "proxy" || owner.status !== "running") throw new Error(`container ${c.name} has no running egress sidecar`);
  const source = "172.17.0.2:40000";
  return new Promise((resolve, reject) => {
    const socket = net.connect(owner.egress.port, "127.0.0.1");
    let head = Buffer.alloc(0);
    const fail = (e) => {
      socket.destroy();
      reject(e);
    };
    socket.once("error", fail);
    socket.once("connect", () => {
      socket.write(`CONNECT ${address} HTTP/1.1\r\nHost: ${address}\r\nUser-Agent: proxy-everything/0.0.1/${source}\r\nConnection: close\r\nX-Forwarded-For: ${source}\r\nX-Proto: tcp\r\n\r\n`);
    });
    const onData = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.off("data", onData);
      socket.off("error", fail);
      socket.pause();
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString("latin1"))?.[1]);
      const rest = head.subarray(end + 4);
      if (status === 400) return fail(new Error(`the gateway refused ${address}`));
      if (!(status >= 200 && status < 300)) return fail(new Error(`the gateway answered ${status || "nonsense"} for ${address}`));
      if (rest.length) socket.unshift(rest);
      resolve(socket);
    };
    socket.on("data", onData);
  });
}

/** Stops sidecar container `c`: its server and every tunnel through it. */
export function stopSidecar(c) {
  for (const s of c.tunnels) s.destroy();
  c.tunnels.clear();
  c.server?.close();
  c.server = null;
}
