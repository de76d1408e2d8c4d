// A stand-in for the Docker Engine, as strict as the real one about the part
// of its HTTP API that workerd's container client uses, served on a unix
// socket. workerd drives a Durable Object's container through it exactly as
// it drives Docker; the "containers" are local processes:
//
// - the Sandbox image (e.g. "duet-sandbox:test") runs sandboxd like the
//   Dockerfile's ENTRYPOINT, with a fresh root directory per container (its
//   filesystem: kept across restarts, deleted on remove) and a fresh loopback
//   port standing for port 8080 of its network namespace;
// - the egress interceptor image (workerd's "proxy-everything" sidecar, which
//   owns the network namespace the Sandbox container joins) is served in
//   process: `PUT /egress`, `GET /ca`, and `CONNECT` with `X-Dst-Addr`, which
//   tunnels to a port of its namespace or answers 400 when nothing listens
//   there, as proxy-everything does.
//
// Container state is tracked like Docker does: created, running, restarting
// (the restart policy workerd asks for is honoured, with Docker's backoff),
// exited (with the exit code; a process killed by a signal exits 128+n, as
// under tini), removing. Status codes follow the Engine API: 201/409/404/400
// on create, 204/304/404 on start and stop, 204/409/404 on kill, 200/404 on
// wait, 204/404/409 on delete. Anything else is answered with Docker's
// 404 {"message": "page not found"} and listed in `unknown`.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";

import { ROOT, freePort, tempDir } from "./stack.mjs";

/** The sidecar image this stand-in serves unless told otherwise. */
export const EGRESS_IMAGE = "duet-proxy-everything:test";
const SIDECAR_INGRESS_PORT = "39001/tcp";
const SANDBOX_PORT = 8080;

// What an image's ENTRYPOINT does. `port` is the host port standing for
// port 8080 of the container's network namespace.
const ENTRYPOINTS = {
  // The Duet sandbox image.
  sandboxd: ({ port, root }) => [path.join(ROOT, "target/release/sandboxd"), ["--listen", `127.0.0.1:${port}`, "--root", root]],
  // A broken build: listens on 8080 and never answers.
  silent: ({ port }) => [process.execPath, ["-e", `require("net").createServer(() => {}).listen(${port}, "127.0.0.1")`]],
  // A broken build: never listens.
  deaf: () => ["sleep", ["3600"]],
};

const SIGNALS = os.constants.signals;

class DockerError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/**
 * Starts the stand-in. `images` maps image names to an entrypoint kind
 * ("sandboxd", "silent", "deaf"); the egress image is always known.
 */
export async function startFakeDocker({ images = {}, egressImage = EGRESS_IMAGE } = {}) {
  const dir = tempDir("docker");
  const socketPath = path.join(dir, "docker.sock");
  const imageKinds = new Map(Object.entries(images));
  const containers = new Map(); // name -> container
  const calls = []; // { method, path, status }
  const unknown = [];
  const sockets = new Set();

  const byName = (ref) => {
    const found = containers.get(ref) ?? [...containers.values()].find((c) => c.id === ref || (ref.length >= 12 && c.id.startsWith(ref)));
    if (!found) throw new DockerError(404, `No such container: ${ref}`);
    return found;
  };
  const isUp = (c) => c.status === "running" || c.status === "restarting";

  // ---- processes ---------------------------------------------------------

  function notify(c) {
    const waiters = c.exitWaiters;
    c.exitWaiters = [];
    for (const resolve of waiters) resolve(c.exitCode);
  }

  function launch(c) {
    c.status = "running";
    c.startedAt = new Date().toISOString();
    c.runs += 1;
    if (c.kind === "proxy") {
      startProxy(c);
      return;
    }
    const ns = namespaceOf(c);
    if (!c.port) throw new DockerError(500, "container has no port"); // set at create
    const [cmd, args] = ENTRYPOINTS[c.kind]({ port: c.port, root: c.root });
    const env = { PATH: process.env.PATH, LANG: "C.UTF-8" };
    for (const kv of c.config.Env ?? []) {
      const i = kv.indexOf("=");
      if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1);
    }
    const child = spawn(cmd, args, { cwd: c.root, env, detached: true, stdio: ["ignore", "ignore", "pipe"] });
    c.child = child;
    c.pid = child.pid ?? 0;
    c.log = "";
    child.stderr.on("data", (chunk) => {
      c.log = (c.log + chunk).slice(-4000);
    });
    ns.ports.set(SANDBOX_PORT, c.port);
    child.once("error", (e) => {
      c.log += `\n${e.message}`;
    });
    child.once("exit", (code, signal) => {
      // The whole container goes when its first process does.
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
      if (ns.ports.get(SANDBOX_PORT) === c.port) ns.ports.delete(SANDBOX_PORT);
      exited(c, code ?? 128 + (SIGNALS[signal] ?? 0));
    });
  }

  function exited(c, code) {
    c.child = null;
    c.pid = 0;
    c.exitCode = code;
    c.finishedAt = new Date().toISOString();
    const policy = c.hostConfig.RestartPolicy ?? {};
    const max = policy.MaximumRetryCount ?? 0;
    const restart =
      !c.manualStop &&
      c.status !== "removing" &&
      (policy.Name === "always" ||
        policy.Name === "unless-stopped" ||
        (policy.Name === "on-failure" && code !== 0 && (max === 0 || c.restartCount < max)));
    if (restart) {
      // Docker's backoff: 100 ms doubling, reset after 10 s of running.
      const ran = Date.now() - Date.parse(c.startedAt);
      c.backoff = ran > 10_000 ? 100 : Math.min((c.backoff ?? 50) * 2, 60_000);
      c.restartCount += 1;
      c.status = "restarting";
      c.restartTimer = setTimeout(() => {
        c.restartTimer = null;
        if (c.status !== "restarting") return;
        try {
          launch(c);
        } catch (e) {
          c.status = "exited";
          c.error = e.message;
        }
      }, c.backoff);
    } else if (c.status !== "removing") {
      c.status = "exited";
    }
    notify(c);
  }

  /** Signals a running container's processes; resolves once it exited. */
  function signalContainer(c, signal) {
    const done = new Promise((resolve) => c.exitWaiters.push(resolve));
    if (c.kind === "proxy") {
      stopProxy(c);
      exited(c, 128 + (SIGNALS[signal] ?? 9));
    } else if (c.child) {
      try {
        process.kill(-c.child.pid, signal);
      } catch {
        c.child.kill(signal);
      }
    }
    return done;
  }

  async function stopContainer(c, seconds) {
    c.manualStop = true;
    if (c.status === "restarting") {
      clearTimeout(c.restartTimer);
      c.status = "exited";
      return;
    }
    const done = signalContainer(c, c.config.StopSignal || "SIGTERM");
    const timer = setTimeout(() => c.child && signalContainer(c, "SIGKILL"), seconds * 1000);
    await done;
    clearTimeout(timer);
  }

  // ---- network namespaces and the sidecar ----------------------------------

  function namespaceOf(c) {
    const mode = c.hostConfig.NetworkMode ?? "";
    if (mode.startsWith("container:")) return byName(mode.slice("container:".length)).ns;
    return c.ns;
  }

  function startProxy(c) {
    const server = http.createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        c.proxyCalls.push(`${req.method} ${req.url}`);
        if (req.method === "PUT" && req.url === "/egress") {
          try {
            c.egress = JSON.parse(body);
          } catch {
            res.writeHead(400).end("bad json");
            return;
          }
          res.writeHead(200, { "content-type": "application/json" }).end("{}");
        } else if (req.method === "GET" && req.url === "/ca") {
          res.writeHead(200, { "content-type": "application/x-pem-file" }).end("-----BEGIN CERTIFICATE-----\nZmFrZQ==\n-----END CERTIFICATE-----\n");
        } else {
          res.writeHead(404).end("not found");
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

  function stopProxy(c) {
    for (const s of c.tunnels) s.destroy();
    c.tunnels.clear();
    c.server?.close();
    c.server = null;
  }

  // ---- the Engine API -------------------------------------------------------

  function inspect(c) {
    const up = c.status === "running";
    const ports = {};
    const mode = c.hostConfig.NetworkMode ?? "";
    if (!mode.startsWith("container:")) {
      for (const key of Object.keys(c.config.ExposedPorts ?? {})) {
        ports[key] = up && c.hostConfig.PublishAllPorts ? [{ HostIp: "127.0.0.1", HostPort: String(c.port) }] : null;
      }
    }
    return {
      Id: c.id,
      Created: c.created,
      Path: c.kind,
      Args: [],
      Name: `/${c.name}`,
      Image: c.image,
      RestartCount: c.restartCount,
      State: {
        Status: c.status,
        Running: isUp(c),
        Paused: false,
        Restarting: c.status === "restarting",
        OOMKilled: false,
        Dead: false,
        Pid: c.pid,
        ExitCode: c.exitCode,
        Error: c.error ?? "",
        StartedAt: c.startedAt ?? "0001-01-01T00:00:00Z",
        FinishedAt: c.finishedAt ?? "0001-01-01T00:00:00Z",
      },
      Config: { Image: c.image, Cmd: c.config.Cmd ?? null, Env: c.config.Env ?? [], ExposedPorts: c.config.ExposedPorts ?? {} },
      HostConfig: c.hostConfig,
      NetworkSettings: { Ports: ports },
    };
  }

  async function create(query, body) {
    const name = query.get("name") ?? randomBytes(6).toString("hex");
    if (!/^\/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$/.test(name)) throw new DockerError(400, `Invalid container name (${name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed`);
    let config;
    try {
      config = JSON.parse(body || "null");
    } catch (e) {
      throw new DockerError(400, `invalid JSON: ${e.message}`);
    }
    if (!config || typeof config !== "object") throw new DockerError(400, "config cannot be empty in order to create a container");
    if (typeof config.Image !== "string" || !config.Image) throw new DockerError(400, "no image specified");
    const kind = config.Image === egressImage ? "proxy" : imageKinds.get(config.Image);
    if (!kind) throw new DockerError(404, `No such image: ${config.Image}`);
    const existing = containers.get(name);
    if (existing) throw new DockerError(409, `Conflict. The container name "/${name}" is already in use by container "${existing.id}". You have to remove (or rename) that container to be able to reuse that name.`);
    const hostConfig = config.HostConfig ?? {};
    const mode = hostConfig.NetworkMode ?? "";
    if (mode.startsWith("container:")) {
      if (hostConfig.PublishAllPorts || Object.keys(hostConfig.PortBindings ?? {}).length) throw new DockerError(400, "conflicting options: port publishing and the container type network mode");
      byName(mode.slice("container:".length)); // 404 when it does not exist
    }
    if (hostConfig.RestartPolicy?.Name && !["no", "always", "unless-stopped", "on-failure"].includes(hostConfig.RestartPolicy.Name)) {
      throw new DockerError(400, `invalid restart policy '${hostConfig.RestartPolicy.Name}'`);
    }
    const c = {
      id: randomBytes(32).toString("hex"),
      name,
      image: config.Image,
      kind,
      config: kind === "proxy" ? config : { ...config, ExposedPorts: { ...(config.ExposedPorts ?? {}), [`${SANDBOX_PORT}/tcp`]: {} } },
      hostConfig,
      created: new Date().toISOString(),
      status: "created",
      exitCode: 0,
      pid: 0,
      runs: 0,
      restartCount: 0,
      manualStop: false,
      exitWaiters: [],
      removeWaiters: [],
      ns: { ports: new Map() },
      // Its own filesystem: kept across stop/start and restarts, gone on remove.
      root: kind === "proxy" ? null : tempDir("container"),
      port: await freePort(),
      proxyCalls: [],
      tunnels: new Set(),
    };
    containers.set(name, c);
    return [201, { Id: c.id, Warnings: [] }];
  }

  function start(c) {
    if (isUp(c)) return [304, null];
    if (c.status === "removing") throw new DockerError(409, `container ${c.id} is marked for removal and cannot be started`);
    const mode = c.hostConfig.NetworkMode ?? "";
    if (mode.startsWith("container:")) {
      const owner = byName(mode.slice("container:".length));
      if (owner.status !== "running") throw new DockerError(409, `cannot join network namespace of a non running container: ${owner.id}`);
    }
    c.manualStop = false;
    c.restartCount = 0;
    launch(c);
    return [204, null];
  }

  async function remove(c, force) {
    if (c.status === "removing") throw new DockerError(409, `removal of container ${c.name} is already in progress`);
    if (isUp(c) && !force) throw new DockerError(409, `You cannot remove a running container ${c.id}. Stop the container before attempting removal or force remove`);
    const sharing = [...containers.values()].filter((o) => o !== c && (o.hostConfig.NetworkMode ?? "") === `container:${c.name}` && isUp(o));
    c.manualStop = true;
    clearTimeout(c.restartTimer);
    if (c.status === "running") {
      c.status = "removing";
      await signalContainer(c, "SIGKILL");
    }
    c.status = "removing";
    if (c.root) fs.rmSync(c.root, { recursive: true, force: true });
    containers.delete(c.name);
    notify(c);
    for (const resolve of c.removeWaiters.splice(0)) resolve(c.exitCode);
    // Containers in its network namespace lose their network, not their life.
    for (const o of sharing) o.ns = { ports: new Map() };
    return [204, null];
  }

  async function wait(c, condition) {
    if (condition === "removed") {
      const code = await new Promise((resolve) => c.removeWaiters.push(resolve));
      return [200, { StatusCode: code, Error: null }];
    }
    if (condition === "not-running" || !condition) {
      if (!isUp(c)) return [200, { StatusCode: c.exitCode, Error: null }];
    } else if (condition !== "next-exit") {
      throw new DockerError(400, `invalid condition: "${condition}"`);
    }
    const code = await new Promise((resolve) => c.exitWaiters.push(resolve));
    return [200, { StatusCode: code, Error: null }];
  }

  async function route(method, pathname, query, body) {
    const p = pathname.replace(/^\/v\d+\.\d+(?=\/)/, "");
    let m;
    if (method === "GET" && (p === "/_ping" || p === "/_ping/")) return [200, "OK"];
    if (method === "GET" && p === "/version") return [200, { Version: "27.0.0-duet-test", ApiVersion: "1.47", MinAPIVersion: "1.24", Os: "linux", Arch: "amd64" }];
    if (method === "GET" && p === "/volumes") return [200, { Volumes: [], Warnings: [] }];
    if (method === "GET" && p === "/networks/bridge") {
      // A loopback "bridge": workerd listens for the sidecar's egress on its gateway.
      return [200, { Name: "bridge", Id: "b".repeat(64), Driver: "bridge", EnableIPv6: false, IPAM: { Driver: "default", Config: [{ Subnet: "127.0.0.0/8", Gateway: "127.0.0.1" }] } }];
    }
    if (method === "GET" && (m = /^\/images\/(.+)\/json$/.exec(p))) {
      const image = decodeURIComponent(m[1]);
      if (image !== egressImage && !imageKinds.has(image)) throw new DockerError(404, `No such image: ${image}`);
      return [200, { Id: `sha256:${Buffer.from(image).toString("hex").padEnd(64, "0").slice(0, 64)}`, RepoTags: [image], Size: 1 }];
    }
    if (method === "POST" && p === "/containers/create") return create(query, body);
    if ((m = /^\/containers\/([^/]+)(\/[a-z]+)?$/.exec(p))) {
      const c = byName(decodeURIComponent(m[1]));
      const action = m[2] ?? "";
      if (method === "GET" && action === "/json") return [200, inspect(c)];
      if (method === "POST" && action === "/start") return start(c);
      if (method === "POST" && action === "/stop") {
        if (!isUp(c)) return [304, null];
        await stopContainer(c, Number(query.get("t") ?? c.config.StopTimeout ?? 10));
        return [204, null];
      }
      if (method === "POST" && action === "/kill") {
        if (!isUp(c) || c.status === "restarting") throw new DockerError(409, `Cannot kill container: ${c.name}: Container ${c.id} is not running`);
        const signal = query.get("signal") ?? "SIGKILL";
        const name = /^\d+$/.test(signal) ? Object.keys(SIGNALS).find((k) => SIGNALS[k] === Number(signal)) : signal.startsWith("SIG") ? signal : `SIG${signal}`;
        if (!name || !(name in SIGNALS)) throw new DockerError(400, `Invalid signal: ${signal}`);
        c.manualStop = true;
        signalContainer(c, name);
        return [204, null];
      }
      if (method === "POST" && action === "/wait") return wait(c, query.get("condition"));
      if (method === "DELETE" && action === "") return remove(c, ["1", "true"].includes(query.get("force")));
    }
    unknown.push(`${method} ${pathname}`);
    return [404, { message: "page not found" }];
  }

  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d) => (body += d));
    req.on("end", async () => {
      const url = new URL(req.url, "http://docker");
      const call = { method: req.method, path: req.url, status: 0 };
      calls.push(call);
      let status, payload;
      try {
        [status, payload] = await route(req.method, url.pathname, url.searchParams, body);
      } catch (e) {
        [status, payload] = e instanceof DockerError ? [e.status, { message: e.message }] : [500, { message: String(e?.stack ?? e) }];
      }
      call.status = status;
      if (res.destroyed) return;
      if (payload === null || status === 204 || status === 304) {
        res.writeHead(status).end();
      } else if (typeof payload === "string") {
        res.writeHead(status, { "content-type": "text/plain; charset=utf-8" }).end(payload);
      } else {
        res.writeHead(status, { "content-type": "application/json", "api-version": "1.47" }).end(`${JSON.stringify(payload)}\n`);
      }
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  await new Promise((resolve, reject) => server.once("error", reject).listen(socketPath, resolve));

  return {
    socketPath,
    /** What Miniflare's `containerEngine.localDocker.socketPath` takes. */
    engine: `unix://${socketPath}`,
    egressImage,
    calls,
    unknown,
    /** Calls as "METHOD /path" strings, query included, optionally from index `since`. */
    log: (since = 0) => calls.slice(since).map((c) => `${c.method} ${c.path}`),
    /** A snapshot of one container (by name), or undefined. */
    container: (name) => containers.get(name),
    /** Containers of an image, by name. */
    containersOf: (image) => [...containers.values()].filter((c) => c.image === image),
    /** Makes an image name run another entrypoint kind, or removes it (`docker rmi`). */
    setImage(name, kind) {
      if (kind) imageKinds.set(name, kind);
      else imageKinds.delete(name);
    },
    /**
     * Kills a running container's processes from outside the engine, as a
     * crash or the OOM killer does; resolves with the exit code once it has
     * exited. The restart policy then applies as in Docker.
     */
    async crash(name, signal = "SIGKILL") {
      const c = byName(name);
      if (c.status !== "running" || !c.child) throw new Error(`container ${name} is not running`);
      return signalContainer(c, signal);
    },
    async close() {
      for (const c of containers.values()) {
        c.manualStop = true;
        clearTimeout(c.restartTimer);
        if (c.status === "running") await signalContainer(c, "SIGKILL");
        if (c.root) fs.rmSync(c.root, { recursive: true, force: true });
      }
      containers.clear();
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
