// A stand-in for the Docker Engine, as strict as the real one about the part
// of its HTTP API that workerd's container client and Miniflare use, served
// on a unix socket. workerd drives a Durable Object's container through it
// exactly as it drives Docker; the "containers" are local processes:
//
// - the Sandbox image (e.g. "duet-sandbox:test") runs sandboxd like the
//   Dockerfile's ENTRYPOINT, with a fresh root directory per container (its
//   filesystem: kept across restarts, deleted on remove) and a fresh loopback
//   port standing for port 8080 of its network namespace;
// - the egress interceptor image (workerd's "proxy-everything" sidecar, which
//   owns the network namespace the Sandbox container joins) is served in
//   process: `PUT /egress` (as strict as proxy-everything: a JSON object
//   with at least one of `port`, `internet.enabled`, `dns.allowHostnames`,
//   each of its type, else 400; 204 when applied; the sidecar starts with
//   its `--http-egress-port`, the internet enabled and every name allowed),
//   `GET /ca`, other methods 405, and `CONNECT` with `X-Dst-Addr`, which
//   tunnels to a port of its namespace or answers 400 when nothing listens
//   there, as proxy-everything does. Its other half, the container's
//   outbound connections, is `dialOut`: what the sidecar's TPROXY does with
//   a connection a process in the container opens (a `CONNECT` to workerd's
//   egress listener at the bridge gateway, on the port `PUT /egress` set),
//   so whether the internet is on is decided by workerd, as it is.
//
// The engine side follows the Engine API reference (API 1.47, Docker 27):
//
// - `GET|HEAD /_ping` with the headers clients negotiate from (`Api-Version`,
//   `Docker-Experimental`, `Ostype`, `Builder-Version`, `Swarm`), `GET
//   /version` and `GET /info` (the Docker CLI's `docker info`, which Miniflare
//   runs to learn from `SecurityOptions` whether the engine is rootless; this
//   one is a rootful engine);
// - paths may carry a `/v1.xx` prefix; versions outside 1.24..1.47 are
//   refused with 400, as the daemon's version middleware does;
// - `GET /containers/json` (all, filters: id, name, label, status),
//   `POST /containers/create`, `GET /containers/{id}/json`, `POST
//   /containers/{id}/{start,stop,kill,wait,pause,unpause}`, `DELETE
//   /containers/{id}`, `GET /images/{name}/json`, `GET /volumes`, `GET
//   /networks/bridge`.
//
// Container state is tracked like Docker does: created, running, paused,
// restarting (the restart policy workerd asks for is honoured, with Docker's
// backoff), exited (with the exit code; a process killed by a signal exits
// 128+n, as under tini), removing. A wait returns on every exit, restarts
// included. Status codes follow the Engine API: 201/409/404/400 on create,
// 204/304/404/409 on start and stop, 204/409/404 on kill, pause and unpause,
// 200/404/400 on wait, 204/404/409 on delete. Anything else is answered with
// Docker's 404 {"message": "page not found"} and listed in `unknown`, as is
// any part of a known endpoint this stand-in does not model.
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
const SANDBOX_PORT = 8080;

// What the engine says it is.
const ENGINE_VERSION = "27.3.1";
const API_VERSION = "1.47";
const MIN_API_VERSION = "1.24";

// What an image's ENTRYPOINT does. `port` is the host port standing for
// port 8080 of the container's network namespace; `extra`, the words after
// the kind's name (an image of kind "sandboxd --max-restore-bytes=1000").
const ENTRYPOINTS = {
  // The Duet sandbox image.
  sandboxd: ({ port, root, extra }) => [path.join(ROOT, "target/release/sandboxd"), ["--listen", `127.0.0.1:${port}`, "--root", root, ...extra]],
  // The sandbox image on a slow machine: sandboxd answers only after 8 s.
  "slow-sandboxd": ({ port, root }) => ["sh", ["-c", 'sleep 8; exec "$0" "$@"', path.join(ROOT, "target/release/sandboxd"), "--listen", `127.0.0.1:${port}`, "--root", root]],
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

/** Compares two "major.minor" API versions. */
function compareVersions(a, b) {
  const [x, y] = [a, b].map((v) => v.split(".").map(Number));
  return x[0] - y[0] || x[1] - y[1];
}

/** A stable image ID for an image name. */
const imageId = (image) => `sha256:${Buffer.from(image).toString("hex").padEnd(64, "0").slice(0, 64)}`;

/** Docker's human-readable durations, as in `docker ps`'s STATUS column. */
function humanDuration(ms) {
  const s = Math.round(ms / 1000);
  if (s < 1) return "Less than a second";
  if (s < 60) return `${s} seconds`;
  const m = Math.round(s / 60);
  return m < 60 ? `${m} minutes` : `${Math.round(m / 60)} hours`;
}

/**
 * Starts the stand-in. `images` maps image names to an entrypoint kind
 * ("sandboxd", "slow-sandboxd", "silent", "deaf"), which may be followed by
 * arguments for it; the egress image is always known.
 */
export async function startFakeDocker({ images = {}, egressImage = EGRESS_IMAGE } = {}) {
  const dir = tempDir("docker");
  const socketPath = path.join(dir, "docker.sock");
  const imageKinds = new Map(Object.entries(images));
  const containers = new Map(); // name -> container
  const calls = []; // { method, path, status, image?, sent }
  const unknown = [];
  const sockets = new Set();

  const find = (ref) => containers.get(ref) ?? [...containers.values()].find((c) => c.id === ref || (ref.length >= 12 && c.id.startsWith(ref)));
  const byName = (ref) => {
    const found = find(ref);
    if (!found) throw new DockerError(404, `No such container: ${ref}`);
    return found;
  };
  const isUp = (c) => c.status === "running" || c.status === "restarting" || c.status === "paused";
  /** A part of the Engine API this stand-in does not model: recorded, and refused. */
  const unmodelled = (what) => {
    unknown.push(what);
    return new DockerError(404, `not modelled by this stand-in: ${what}`);
  };

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
      const cmd = c.config.Cmd ?? [];
      const flag = cmd.indexOf("--http-egress-port");
      // proxy-everything's state at start: its flag's port, the internet on, every name allowed.
      c.egress = { port: flag >= 0 ? Number(cmd[flag + 1]) : 49121, internet: { enabled: true }, dns: { allowHostnames: ["*"] } };
      startProxy(c);
      return;
    }
    const ns = namespaceOf(c);
    if (!c.port) throw new DockerError(500, "container has no port"); // set at create
    const [kind, ...extra] = c.kind.split(" ");
    const [cmd, args] = ENTRYPOINTS[kind]({ port: c.port, root: c.root, extra });
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
      const status = code ?? 128 + (SIGNALS[signal] ?? 0);
      if (c.unnoticed) {
        // Dead, but the engine has not processed the exit yet.
        c.unnoticed = () => exited(c, status);
      } else {
        exited(c, status);
      }
    });
  }

  /** The engine processes an exit it has not noticed yet (see `crash`). */
  function notice(c) {
    const pending = c.unnoticed;
    c.unnoticed = null;
    if (typeof pending === "function") pending();
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
    } else if (c.unnoticed) {
      // Acting on it makes the engine find out it is gone (or, when it is
      // still dying, has it processed the exit as usual).
      if (c.unnoticed === true) c.unnoticed = null;
      else notice(c);
    } else if (c.child) {
      try {
        process.kill(-c.child.pid, signal);
      } catch {
        c.child.kill(signal);
      }
      // A paused container's processes get the signal once thawed, as the
      // daemon thaws a paused container it stops or kills.
      if (c.status === "paused") thaw(c);
    }
    return done;
  }

  function freeze(c) {
    process.kill(-c.child.pid, "SIGSTOP");
    c.status = "paused";
  }

  function thaw(c) {
    c.status = "running";
    try {
      process.kill(-c.child.pid, "SIGCONT");
    } catch {}
  }

  async function stopContainer(c, seconds) {
    c.manualStop = true;
    if (c.status === "restarting") {
      clearTimeout(c.restartTimer);
      c.status = "exited";
      notify(c);
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
  function dialOut(c, address) {
    const owner = byName(((c.hostConfig.NetworkMode ?? "").match(/^container:(.+)$/) ?? [])[1] ?? c.name);
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

  function stopProxy(c) {
    for (const s of c.tunnels) s.destroy();
    c.tunnels.clear();
    c.server?.close();
    c.server = null;
  }

  // ---- the Engine API -------------------------------------------------------

  function publishedPorts(c) {
    const ports = {};
    const mode = c.hostConfig.NetworkMode ?? "";
    if (!mode.startsWith("container:")) {
      for (const key of Object.keys(c.config.ExposedPorts ?? {})) {
        ports[key] = c.status === "running" && c.hostConfig.PublishAllPorts ? [{ HostIp: "127.0.0.1", HostPort: String(c.port) }] : null;
      }
    }
    return ports;
  }

  function inspect(c) {
    return {
      Id: c.id,
      Created: c.created,
      Path: c.kind,
      Args: [],
      Name: `/${c.name}`,
      Image: c.imageId,
      RestartCount: c.restartCount,
      State: {
        Status: c.status,
        Running: isUp(c),
        Paused: c.status === "paused",
        Restarting: c.status === "restarting",
        OOMKilled: false,
        Dead: false,
        Pid: c.pid,
        ExitCode: c.exitCode,
        Error: c.error ?? "",
        StartedAt: c.startedAt ?? "0001-01-01T00:00:00Z",
        FinishedAt: c.finishedAt ?? "0001-01-01T00:00:00Z",
      },
      Config: { Image: c.image, Cmd: c.config.Cmd ?? null, Env: c.config.Env ?? [], Labels: c.config.Labels ?? {}, ExposedPorts: c.config.ExposedPorts ?? {} },
      HostConfig: c.hostConfig,
      NetworkSettings: { Ports: publishedPorts(c) },
    };
  }

  /** One entry of `GET /containers/json`. */
  function summary(c) {
    const since = (t) => humanDuration(Date.now() - Date.parse(t));
    const status = {
      created: "Created",
      running: `Up ${since(c.startedAt)}`,
      paused: `Up ${since(c.startedAt)} (Paused)`,
      restarting: `Restarting (${c.exitCode}) ${since(c.finishedAt)} ago`,
      exited: `Exited (${c.exitCode}) ${since(c.finishedAt ?? c.created)} ago`,
      removing: "Removal In Progress",
    }[c.status];
    const ports = [];
    for (const [key, bindings] of Object.entries(publishedPorts(c))) {
      const [port, type] = key.split("/");
      for (const b of bindings ?? [{}]) ports.push({ PrivatePort: Number(port), Type: type, ...(b.HostPort ? { IP: b.HostIp, PublicPort: Number(b.HostPort) } : {}) });
    }
    return {
      Id: c.id,
      Names: [`/${c.name}`],
      Image: c.image,
      ImageID: c.imageId,
      Command: (c.config.Cmd ?? []).join(" "),
      Created: Math.floor(Date.parse(c.created) / 1000),
      Ports: ports,
      Labels: c.config.Labels ?? {},
      State: c.status,
      Status: status,
      HostConfig: { NetworkMode: c.hostConfig.NetworkMode ?? "default" },
      NetworkSettings: { Networks: {} },
      Mounts: [],
    };
  }

  /** `filters` as the API takes it: {"key": ["value", ...]} or, before API 1.22, {"key": {"value": true}}. */
  function parseFilters(text) {
    if (!text) return {};
    let filters;
    try {
      filters = JSON.parse(text);
    } catch (e) {
      throw new DockerError(400, `invalid filter: ${e.message}`);
    }
    if (!filters || typeof filters !== "object" || Array.isArray(filters)) throw new DockerError(400, "invalid filter: not an object");
    return Object.fromEntries(Object.entries(filters).map(([k, v]) => [k, Array.isArray(v) ? v : Object.keys(v ?? {})]));
  }

  function list(query) {
    const filters = parseFilters(query.get("filters"));
    const statuses = ["created", "restarting", "running", "removing", "paused", "exited", "dead"];
    const tests = [];
    for (const [key, values] of Object.entries(filters)) {
      if (key === "id") tests.push((c) => values.some((v) => c.id.startsWith(v)));
      else if (key === "name") tests.push((c) => values.some((v) => new RegExp(v).test(`/${c.name}`)));
      else if (key === "label") {
        tests.push((c) =>
          values.every((v) => {
            const labels = c.config.Labels ?? {};
            const i = v.indexOf("=");
            return i < 0 ? v in labels : labels[v.slice(0, i)] === v.slice(i + 1);
          }),
        );
      } else if (key === "status") {
        for (const v of values) if (!statuses.includes(v)) throw new DockerError(400, `invalid filter 'status=${v}'`);
        tests.push((c) => values.includes(c.status));
      } else if (["ancestor", "before", "expose", "exited", "health", "isolation", "is-task", "network", "publish", "since", "volume"].includes(key)) {
        throw unmodelled(`GET /containers/json filter ${key}`);
      } else {
        throw new DockerError(400, `invalid filter '${key}'`);
      }
    }
    const all = ["1", "true"].includes(query.get("all"));
    // Newest first; the map keeps them in creation order.
    const found = [...containers.values()].reverse().filter((c) => (all || c.status === "running" || c.status === "paused") && tests.every((t) => t(c)));
    const limit = Number(query.get("limit") ?? -1);
    return [200, (limit > 0 ? found.slice(0, limit) : found).map(summary)];
  }

  /** `GET /info`: a rootful engine on this host. */
  function info() {
    const all = [...containers.values()];
    const count = (...states) => all.filter((c) => states.includes(c.status)).length;
    return {
      ID: "DUET:FAKE:ENGINE",
      Containers: all.length,
      ContainersRunning: count("running", "restarting"),
      ContainersPaused: count("paused"),
      ContainersStopped: count("created", "exited", "removing"),
      Images: imageKinds.size + 1,
      Driver: "overlay2",
      DockerRootDir: "/var/lib/docker",
      Name: os.hostname(),
      OSType: "linux",
      OperatingSystem: "Duet test engine",
      KernelVersion: os.release(),
      Architecture: os.machine(),
      NCPU: os.availableParallelism(),
      MemTotal: os.totalmem(),
      ServerVersion: ENGINE_VERSION,
      CgroupDriver: "systemd",
      CgroupVersion: "2",
      DefaultRuntime: "runc",
      Runtimes: { runc: { path: "runc" } },
      LoggingDriver: "json-file",
      Swarm: { LocalNodeState: "inactive", ControlAvailable: false, Error: "", RemoteManagers: null },
      ExperimentalBuild: false,
      Labels: [],
      // Rootful: no "name=rootless"; so no FUSE privileges are asked for.
      SecurityOptions: ["name=seccomp,profile=builtin", "name=cgroupns"],
      Warnings: null,
    };
  }

  async function create(query, body, call) {
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
    call.image = config.Image;
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
      imageId: imageId(config.Image),
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
      unnoticed: null,
      exitWaiters: [],
      removeWaiters: [],
      waits: new Set(), // the wait calls answered on its next exit
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
    if (c.status === "paused") throw new DockerError(409, "cannot start a paused container, try unpause instead");
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
    const wasUp = c.status === "running" || c.status === "paused";
    c.status = "removing";
    if (wasUp) await signalContainer(c, "SIGKILL");
    if (c.root) fs.rmSync(c.root, { recursive: true, force: true });
    containers.delete(c.name);
    notify(c);
    for (const resolve of c.removeWaiters.splice(0)) resolve(c.exitCode);
    // Containers in its network namespace lose their network, not their life.
    for (const o of sharing) o.ns = { ports: new Map() };
    return [204, null];
  }

  async function wait(c, condition, call) {
    if (condition === "removed") {
      const code = await new Promise((resolve) => c.removeWaiters.push(resolve));
      return [200, { StatusCode: code, Error: null }];
    }
    if (condition === "not-running" || !condition) {
      if (!isUp(c)) return [200, { StatusCode: c.exitCode, Error: null }];
    } else if (condition !== "next-exit") {
      throw new DockerError(400, `invalid condition: "${condition}"`);
    }
    c.waits.add(call);
    const code = await new Promise((resolve) => c.exitWaiters.push(resolve));
    c.waits.delete(call);
    return [200, { StatusCode: code, Error: null }];
  }

  function pause(c) {
    if (c.status === "paused") throw new DockerError(409, `Container ${c.id} is already paused`);
    if (c.status !== "running" || !c.child) throw new DockerError(409, `Container ${c.id} is not running`);
    freeze(c);
    return [204, null];
  }

  function unpause(c) {
    if (c.status !== "paused") throw new DockerError(409, `Container ${c.id} is not paused`);
    thaw(c);
    return [204, null];
  }

  async function route(method, pathname, query, body, call) {
    // The daemon's version middleware: an optional /v1.xx prefix, within bounds.
    const versioned = /^\/v(\d+\.\d+)(\/.*)$/.exec(pathname);
    const p = versioned ? versioned[2] : pathname;
    if (versioned) {
      const v = versioned[1];
      if (compareVersions(v, MIN_API_VERSION) < 0) throw new DockerError(400, `client version ${v} is too old. Minimum supported API version is ${MIN_API_VERSION}, please upgrade your client to a newer version`);
      if (compareVersions(v, API_VERSION) > 0) throw new DockerError(400, `client version ${v} is too new. Maximum supported API version is ${API_VERSION}`);
    }
    let m;
    if (p === "/_ping" && method === "HEAD") return [200, null, { "Content-Type": "text/plain; charset=utf-8", "Content-Length": "0", ...PING_HEADERS }];
    if (p === "/_ping" && method === "GET") return [200, "OK", PING_HEADERS];
    if (method === "GET" && p === "/version") {
      return [200, { Version: ENGINE_VERSION, ApiVersion: API_VERSION, MinAPIVersion: MIN_API_VERSION, Os: "linux", Arch: os.machine() === "aarch64" ? "arm64" : "amd64", KernelVersion: os.release(), Experimental: false }];
    }
    if (method === "GET" && p === "/info") return [200, info()];
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
      if (image !== egressImage && !imageKinds.has(image)) throw new DockerError(404, `No such image: ${image}`);
      return [200, { Id: imageId(image), RepoTags: [image], Size: 1 }];
    }
    if (method === "GET" && p === "/containers/json") return list(query);
    if (method === "POST" && p === "/containers/create") return create(query, body, call);
    if ((m = /^\/containers\/([^/]+)(\/[a-z]+)?$/.exec(p))) {
      const action = m[2] ?? "";
      const known = { "/json": "GET", "/start": "POST", "/stop": "POST", "/kill": "POST", "/wait": "POST", "/pause": "POST", "/unpause": "POST", "": "DELETE" };
      if (known[action] === method) {
        const c = byName(decodeURIComponent(m[1]));
        if (action === "/json") return [200, inspect(c)];
        if (action === "/start") return start(c);
        if (action === "/stop") {
          if (!isUp(c)) return [304, null];
          await stopContainer(c, Number(query.get("t") ?? c.config.StopTimeout ?? 10));
          return [204, null];
        }
        if (action === "/kill") {
          if (!isUp(c) || c.status === "restarting") throw new DockerError(409, `Cannot kill container: ${c.name}: Container ${c.id} is not running`);
          const signal = query.get("signal") ?? "SIGKILL";
          const name = /^\d+$/.test(signal) ? Object.keys(SIGNALS).find((k) => SIGNALS[k] === Number(signal)) : signal.startsWith("SIG") ? signal : `SIG${signal}`;
          if (!name || !(name in SIGNALS)) throw new DockerError(400, `Invalid signal: ${signal}`);
          c.manualStop = true;
          signalContainer(c, name);
          return [204, null];
        }
        if (action === "/wait") return wait(c, query.get("condition"), call);
        if (action === "/pause") return pause(c);
        if (action === "/unpause") return unpause(c);
        return remove(c, ["1", "true"].includes(query.get("force")));
      }
    }
    unknown.push(`${method} ${pathname}`);
    return [404, { message: "page not found" }];
  }

  const PING_HEADERS = { "Cache-Control": "no-cache, no-store, must-revalidate", Pragma: "no-cache", "Builder-Version": "2", Swarm: "inactive" };
  // What the daemon's middlewares put on every answer.
  const COMMON_HEADERS = { "Api-Version": API_VERSION, "Docker-Experimental": "false", Ostype: "linux", Server: `Docker/${ENGINE_VERSION} (linux)` };

  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d) => (body += d));
    req.on("end", async () => {
      const url = new URL(req.url, "http://docker");
      const call = { method: req.method, path: req.url, status: 0 };
      call.sent = new Promise((resolve) => res.once("close", resolve));
      calls.push(call);
      let status, payload, headers;
      try {
        [status, payload, headers] = await route(req.method, url.pathname, url.searchParams, body, call);
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

  /** Resolves once the engine has answered every wait in `waits` (sent them the exit). */
  const reported = (waits) => Promise.all([...waits].map((call) => call.sent));

  return {
    socketPath,
    /** What Miniflare's `containerEngine.localDocker.socketPath` takes. */
    engine: `unix://${socketPath}`,
    egressImage,
    calls,
    unknown,
    /** Calls as "METHOD /path" strings, query included, optionally from index `since`. */
    log: (since = 0) => calls.slice(since).map((c) => `${c.method} ${c.path}`),
    /** The live state of one container (by name or id, as the API takes it), or undefined. */
    container: (ref) => find(ref),
    /** Containers of an image. */
    containersOf: (image) => [...containers.values()].filter((c) => c.image === image),
    /** Makes an image name run another entrypoint kind, or removes it (`docker rmi`). */
    setImage(name, kind) {
      if (kind) imageKinds.set(name, kind);
      else imageKinds.delete(name);
    },
    /**
     * Kills a running container's processes from outside the engine, as a
     * crash or the OOM killer does; resolves with the exit code once it has
     * exited and the engine has answered every wait on it. The restart
     * policy then applies as in Docker.
     *
     * With `{ unnoticed: true }` the processes die but the engine does not
     * process the exit (state, waits, restart policy) until `noticeExit` is
     * called: the window, short with a real engine, between a container's
     * death and the engine reporting it. Resolves once the processes are gone.
     */
    async crash(name, signal = "SIGKILL", { unnoticed = false } = {}) {
      const c = byName(name);
      if (c.status !== "running" || !c.child) throw new Error(`container ${name} is not running`);
      const child = c.child;
      if (unnoticed) {
        c.unnoticed = true;
        const gone = new Promise((resolve) => child.once("exit", resolve));
        process.kill(-child.pid, signal);
        await gone;
        return undefined;
      }
      const waits = new Set(c.waits);
      const code = await signalContainer(c, signal);
      await reported(waits);
      return code;
    },
    /** The engine processes the exit `crash(name, signal, {unnoticed: true})` left; resolves with its code once every wait on it was answered. */
    async noticeExit(name) {
      const c = byName(name);
      if (typeof c.unnoticed !== "function") throw new Error(`container ${name} has no unnoticed exit`);
      const waits = new Set(c.waits);
      notice(c);
      await reported(waits);
      return c.exitCode;
    },
    /** A TCP connection container `name` opens to `address`, through its sidecar (see `dialOut` above). */
    dialOut: (name, address) => dialOut(byName(name), address),
    /** `docker pause` / `docker unpause`: freezes and thaws a running container's processes. */
    pause(name) {
      pause(byName(name));
    },
    unpause(name) {
      unpause(byName(name));
    },
    async close() {
      for (const c of containers.values()) {
        c.manualStop = true;
        clearTimeout(c.restartTimer);
        if (c.status === "running" || c.status === "paused") await signalContainer(c, "SIGKILL");
        if (c.root) fs.rmSync(c.root, { recursive: true, force: true });
      }
      containers.clear();
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
