// What the engine reports about its containers: `GET /containers/{id}/json`
// and `GET /containers/json` (all, limit; filters id, name, label and
// status; the other filters Docker has are refused as unmodelled), in the
// shapes and wording of the Engine API, ports as published on this host.
import { DockerError, isUp } from "./engine.mjs";
import { joinedName } from "./network.mjs";

/** Docker's human-readable durations, as in `docker ps`'s STATUS column. */
function humanDuration(ms) {
  const s = Math.round(ms / 1000);
  if (s < 1) return "Less than a second";
  if (s < 60) return `${s} seconds`;
  const m = Math.round(s / 60);
  return m < 60 ? `${m} minutes` : `${Math.round(m / 60)} hours`;
}

/** A container's exposed ports and where they are published: nowhere for one in another's namespace. */
function publishedPorts(c) {
  const ports = {};
  if (joinedName(c.hostConfig) === null) {
    for (const key of Object.keys(c.config.ExposedPorts ?? {})) {
      ports[key] = c.status === "running" && c.hostConfig.PublishAllPorts ? [{ HostIp: "127.0.0.1", HostPort: String(c.port) }] : null;
    }
  }
  return ports;
}

/** `GET /containers/{id}/json`. */
export function inspect(c) {
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
export function parseFilters(text) {
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

/** `GET /containers/json`. */
export function list(engine, query) {
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
      throw engine.unmodelled(`GET /containers/json filter ${key}`);
    } else {
      throw new DockerError(400, `invalid filter '${key}'`);
    }
  }
  const all = ["1", "true"].includes(query.get("all"));
  // Newest first; the map keeps them in creation order.
  const found = [...engine.containers.values()].reverse().filter((c) => (all || c.status === "running" || c.status === "paused") && tests.every((t) => t(c)));
  const limit = Number(query.get("limit") ?? -1);
  return [200, (limit > 0 ? found.slice(0, limit) : found).map(summary)];
}
