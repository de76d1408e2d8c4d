// The Engine API's container operations, with Docker's checks and status
// codes: create (201/409/404/400), start and stop (204/304/404/409), kill,
// pause and unpause (204/409/404), delete (204/404/409). Each answers
// [status, payload] or throws a DockerError. A container is a plain object
// tests may read (status, runs, pid, root, config, hostConfig, ...).
import { randomBytes } from "node:crypto";
import fs from "node:fs";

import { freePort, tempDir } from "../stack.mjs";
import { DockerError, imageId, isUp } from "./engine.mjs";
import { SANDBOX_PORT } from "./entrypoints.mjs";
import { joinedName, newNamespace } from "./network.mjs";
import { SIGNALS, freeze, launch, signalContainer, stopContainer, thaw } from "./processes.mjs";
import { notifyExit, notifyRemoved } from "./waits.mjs";

/** `POST /containers/create?name=...`; records the image asked for on `call`. */
export async function create(engine, query, body, call) {
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
  const kind = engine.kindOf(config.Image);
  if (!kind) throw new DockerError(404, `No such image: ${config.Image}`);
  const existing = engine.containers.get(name);
  if (existing) throw new DockerError(409, `Conflict. The container name "/${name}" is already in use by container "${existing.id}". You have to remove (or rename) that container to be able to reuse that name.`);
  const hostConfig = config.HostConfig ?? {};
  const joined = joinedName(hostConfig);
  if (joined !== null) {
    if (hostConfig.PublishAllPorts || Object.keys(hostConfig.PortBindings ?? {}).length) throw new DockerError(400, "conflicting options: port publishing and the container type network mode");
    engine.byName(joined); // 404 when it does not exist
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
    ns: newNamespace(),
    // Its own filesystem: kept across stop/start and restarts, gone on remove.
    root: kind === "proxy" ? null : tempDir("container"),
    port: await freePort(),
    proxyCalls: [],
    tunnels: new Set(),
  };
  engine.containers.set(name, c);
  return [201, { Id: c.id, Warnings: [] }];
}

export function start(engine, c) {
  if (c.status === "paused") throw new DockerError(409, "cannot start a paused container, try unpause instead");
  if (isUp(c)) return [304, null];
  if (c.status === "removing") throw new DockerError(409, `container ${c.id} is marked for removal and cannot be started`);
  const joined = joinedName(c.hostConfig);
  if (joined !== null) {
    const owner = engine.byName(joined);
    if (owner.status !== "running") throw new DockerError(409, `cannot join network namespace of a non running container: ${owner.id}`);
  }
  c.manualStop = false;
  c.restartCount = 0;
  launch(engine, c);
  return [204, null];
}

/** `POST /containers/{id}/stop?t=...`: `t` seconds (else its `StopTimeout`, else 10) before SIGKILL. */
export async function stop(engine, c, t) {
  if (!isUp(c)) return [304, null];
  await stopContainer(engine, c, Number(t ?? c.config.StopTimeout ?? 10));
  return [204, null];
}

/** `POST /containers/{id}/kill?signal=...`: a name ("SIGTERM", "TERM") or number; SIGKILL when absent. */
export function kill(engine, c, asked) {
  const signal = asked ?? "SIGKILL";
  if (!isUp(c) || c.status === "restarting") throw new DockerError(409, `Cannot kill container: ${c.name}: Container ${c.id} is not running`);
  const name = /^\d+$/.test(signal) ? Object.keys(SIGNALS).find((k) => SIGNALS[k] === Number(signal)) : signal.startsWith("SIG") ? signal : `SIG${signal}`;
  if (!name || !(name in SIGNALS)) throw new DockerError(400, `Invalid signal: ${signal}`);
  c.manualStop = true;
  signalContainer(engine, c, name);
  return [204, null];
}

/** `DELETE /containers/{id}?force=...`. */
export async function remove(engine, c, force) {
  if (c.status === "removing") throw new DockerError(409, `removal of container ${c.name} is already in progress`);
  if (isUp(c) && !force) throw new DockerError(409, `You cannot remove a running container ${c.id}. Stop the container before attempting removal or force remove`);
  const sharing = [...engine.containers.values()].filter((o) => o !== c && joinedName(o.hostConfig) === c.name && isUp(o));
  c.manualStop = true;
  clearTimeout(c.restartTimer);
  const wasUp = c.status === "running" || c.status === "paused";
  c.status = "removing";
  if (wasUp) await signalContainer(engine, c, "SIGKILL");
  if (c.root) fs.rmSync(c.root, { recursive: true, force: true });
  engine.containers.delete(c.name);
  notifyExit(c);
  notifyRemoved(c);
  // Containers in its network namespace lose their network, not their life.
  for (const o of sharing) o.ns = newNamespace();
  return [204, null];
}

export function pause(c) {
  if (c.status === "paused") throw new DockerError(409, `Container ${c.id} is already paused`);
  if (c.status !== "running" || !c.child) throw new DockerError(409, `Container ${c.id} is not running`);
  freeze(c);
  return [204, null];
}

export function unpause(c) {
  if (c.status !== "paused") throw new DockerError(409, `Container ${c.id} is not paused`);
  thaw(c);
  return [204, null];
}

/** Kills every container and deletes its filesystem, when the stand-in closes. */
export async function discardAll(engine) {
  for (const c of engine.containers.values()) {
    c.manualStop = true;
    clearTimeout(c.restartTimer);
    if (c.status === "running" || c.status === "paused") await signalContainer(engine, c, "SIGKILL");
    if (c.root) fs.rmSync(c.root, { recursive: true, force: true });
  }
  engine.containers.clear();
}
