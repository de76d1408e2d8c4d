// The Engine API's HTTP side, on a unix socket: every call recorded (with
// a promise of when its answer was sent), routed to the module that models
// it, and answered as the daemon answers: JSON or text with its common
// headers, an error as `{"message": ...}`. The endpoints:
//
// - `GET|HEAD /_ping`, `GET /version`, `GET /info` (system.mjs);
// - `GET /containers/json`, `GET /containers/{id}/json` (views.mjs);
// - `POST /containers/create`, `POST /containers/{id}/{start,stop,kill,
//   pause,unpause}`, `DELETE /containers/{id}` (containers.mjs);
// - `POST /containers/{id}/wait` (waits.mjs);
// - `GET /images/{name}/json`, `GET /volumes` (none, whatever the filter)
//   and `GET /networks/bridge` (a loopback bridge), here.
//
// Anything else is answered with Docker's 404 {"message": "page not found"}
// and listed in `engine.unknown`, as is any part of a known endpoint this
// stand-in does not model.
import http from "node:http";

import { create, kill, pause, remove, start, stop, unpause } from "./containers.mjs";
import { DockerError, imageId } from "./engine.mjs";
import { COMMON_HEADERS, PING_HEADERS, info, unversioned, version } from "./system.mjs";
import { inspect, list, parseFilters } from "./views.mjs";
import { wait } from "./waits.mjs";

/** The method each action on `/containers/{id}` takes ("" is the container itself). */
const CONTAINER_ACTIONS = { "/json": "GET", "/start": "POST", "/stop": "POST", "/kill": "POST", "/wait": "POST", "/pause": "POST", "/unpause": "POST", "": "DELETE" };

/** Answers one call: [status, payload, headers?]. */
async function route(engine, method, pathname, query, body, call) {
  const p = unversioned(pathname);
  let m;
  if (p === "/_ping" && method === "HEAD") return [200, null, { "Content-Type": "text/plain; charset=utf-8", "Content-Length": "0", ...PING_HEADERS }];
  if (p === "/_ping" && method === "GET") return [200, "OK", PING_HEADERS];
  if (method === "GET" && p === "/version") return [200, version()];
  if (method === "GET" && p === "/info") return [200, info(engine)];
  if (method === "GET" && p === "/volumes") {
    const filters = parseFilters(query.get("filters"));
    for (const key of Object.keys(filters)) if (!["name", "label", "driver", "dangling"].includes(key)) throw new DockerError(400, `invalid filter '${key}'`);
    return [200, { Volumes: [], Warnings: [] }]; // none, whatever the filter
  }
  if (method === "GET" && p === "/networks/bridge") {
    // A loopback "bridge": workerd listens for the sidecar's egress on its gateway.
    return [200, { Name: "bridge", Id: "b".repeat(64), Driver: "bridge", EnableIPv6: false, IPAM: { Driver: "default", Config: [{ Subnet: "127.0.0.0/8", Gateway: "127.0.0.1" }] } }];
  }
  if (method === "GET" && (m = /^\/images\/(.+)\/json$/.exec(p))) {
    const image = decodeURIComponent(m[1]);
    if (engine.kindOf(image) === undefined) throw new DockerError(404, `No such image: ${image}`);
    return [200, { Id: imageId(image), RepoTags: [image], Size: 1 }];
  }
  if (method === "GET" && p === "/containers/json") return list(engine, query);
  if (method === "POST" && p === "/containers/create") return create(engine, query, body, call);
  if ((m = /^\/containers\/([^/]+)(\/[a-z]+)?$/.exec(p))) {
    const action = m[2] ?? "";
    if (CONTAINER_ACTIONS[action] === method) {
      const c = engine.byName(decodeURIComponent(m[1]));
      if (action === "/json") return [200, inspect(c)];
      if (action === "/start") return start(engine, c);
      if (action === "/stop") return stop(engine, c, query.get("t"));
      if (action === "/kill") return kill(engine, c, query.get("signal"));
      if (action === "/wait") return wait(c, query.get("condition"), call);
      if (action === "/pause") return pause(c);
      if (action === "/unpause") return unpause(c);
      return remove(engine, c, ["1", "true"].includes(query.get("force")));
    }
  }
  engine.unknown.push(`${method} ${pathname}`);
  return [404, { message: "page not found" }];
}

/** Serves `engine` on the unix socket `socketPath`; resolves, once listening, with a function that closes it (its connections too). */
export async function listen(engine, socketPath) {
  const sockets = new Set();
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d) => (body += d));
    req.on("end", async () => {
      const url = new URL(req.url, "http://docker");
      const call = { method: req.method, path: req.url, status: 0 };
      call.sent = new Promise((resolve) => res.once("close", resolve));
      engine.calls.push(call);
      let status, payload, headers;
      try {
        [status, payload, headers] = await route(engine, req.method, url.pathname, url.searchParams, body, call);
      } catch (e) {
        [status, payload] = e instanceof DockerError ? [e.status, { message: e.message }] : [500, { message: String(e?.stack ?? e) }];
      }
      call.status = status;
      if (res.destroyed) return;
      headers = { ...COMMON_HEADERS, ...headers };
      if (payload === null || status === 204 || status === 304) {
        res.writeHead(status, headers).end();
      } else if (typeof payload === "string") {
        res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8", ...headers }).end(payload);
      } else {
        res.writeHead(status, { "Content-Type": "application/json", ...headers }).end(`${JSON.stringify(payload)}\n`);
      }
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  await new Promise((resolve, reject) => server.once("error", reject).listen(socketPath, resolve));
  return async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  };
}
