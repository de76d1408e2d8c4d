// The real Docker engine of the container-path tests (scripts/engine/engine):
// started and given its images on first use, then asked through its Engine
// API what the worker did to it. A test sees the engine's own record: its
// containers' state, their files, and its event log.
import { execFileSync } from "node:child_process";
import http from "node:http";

import { ROOT, startWorker } from "./stack.mjs";
import { until } from "./wait.mjs";

/** The image of the repository's Dockerfile, as scripts/engine/engine builds it. */
export const SANDBOX_IMAGE = "duet-sandbox:test";
/** The networking sidecar workerd starts beside each container (sidecar/). */
export const SIDECAR_IMAGE = "duet-sidecar:test";
/** Where the Dockerfile's sandboxd keeps the rooms' workspaces. */
export const WORKSPACES = "/workspace";

let started;

/**
 * The engine, started and given its images once per test process (a few
 * seconds when they are built already; minutes on a new machine).
 */
export function startEngine() {
  started ??= connect(execFileSync("bash", [`${ROOT}/scripts/engine/engine`, "up"], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], timeout: 40 * 60_000 }).trim());
  return started;
}

function connect(host) {
  const socketPath = host.replace(/^unix:\/\//, "");

  /** One Engine API call: { status, json, body (a Buffer) }. */
  function api(method, route, body) {
    return new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const req = http.request(
        { socketPath, method, path: route, headers: payload ? { "content-type": "application/json", "content-length": payload.length } : {}, timeout: 30_000 },
        (res) => {
          const chunks = [];
          res.on("data", (c) => chunks.push(c));
          res.on("end", () => {
            const buffer = Buffer.concat(chunks);
            let json;
            try {
              json = JSON.parse(buffer.toString("utf8"));
            } catch {}
            resolve({ status: res.statusCode, json, body: buffer });
          });
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(new Error(`the engine did not answer ${method} ${route} within 30 s`)));
      req.on("error", reject);
      req.end(payload);
    });
  }
  async function ok(method, route, body) {
    const res = await api(method, route, body);
    if (res.status >= 300) throw new Error(`${method} ${route}: ${res.status} ${res.body.toString("utf8")}`);
    return res;
  }
  /** `docker inspect`: the container, or undefined once the engine has none of that name or id. */
  async function inspect(ref) {
    const res = await api("GET", `/containers/${encodeURIComponent(ref)}/json`);
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw new Error(`inspect ${ref}: ${res.status}`);
    return view(res.json);
  }
  /** What a test asks of a container. */
  const view = (c) => ({
    id: c.Id,
    name: c.Name.replace(/^\//, ""),
    image: c.Config.Image,
    imageId: c.Image,
    status: c.State.Status,
    pid: c.State.Pid,
    startedAt: c.State.StartedAt,
    restarts: c.RestartCount,
    networkMode: c.HostConfig.NetworkMode,
    /** Its first process's command line: the image's ENTRYPOINT and CMD, unless the create gave others. */
    command: [c.Path, ...c.Args],
  });
  /** Whether a path exists in a container's filesystem (running or not). */
  const exists = async (id, file) => (await api("HEAD", `/containers/${id}/archive?path=${encodeURIComponent(file)}`)).status === 200;

  return {
    host,
    socketPath,
    api,
    inspect,
    /** The containers of `image`, running or not. */
    async containersOf(image) {
      const res = await ok("GET", `/containers/json?all=1&filters=${encodeURIComponent(JSON.stringify({ ancestor: [image] }))}`);
      // `ancestor` also matches images built on `image`: keep its own.
      const found = await Promise.all(res.json.map((c) => inspect(c.Id)));
      return found.filter((c) => c && c.image === image);
    },
    /** The containers of `image` whose filesystem holds room `room`'s workspace. */
    async containersOfRoom(image, room) {
      const found = [];
      for (const c of await this.containersOf(image)) if (await exists(c.id, `${WORKSPACES}/sandbox-${room}`)) found.push(c);
      return found;
    },
    exists,
    /** A file of room `room`'s workspace, read from the container's filesystem; undefined when absent. */
    async readFile(id, room, file) {
      const res = await api("GET", `/containers/${id}/archive?path=${encodeURIComponent(`${WORKSPACES}/sandbox-${room}/${file}`)}`);
      if (res.status === 404) return undefined;
      if (res.status !== 200) throw new Error(`archive ${file}: ${res.status}`);
      // A tar of one file: a 512-byte header (size in octal at 124), then its bytes.
      const size = parseInt(res.body.subarray(124, 136).toString("latin1").replace(/\0.*$/, "").trim(), 8);
      return res.body.subarray(512, 512 + size).toString("utf8");
    },
    /**
     * The engine's events about container `id` since `since` (the engine's
     * clock, as `now` gives it) until now: [{ action, exitCode? }], e.g.
     * create, start, die (with its exit code), destroy. Reads of its files
     * and execs left out.
     */
    async eventsOf(id, since) {
      const to = this.now();
      const filters = encodeURIComponent(JSON.stringify({ container: [id], type: ["container"] }));
      const res = await ok("GET", `/events?since=${since}&until=${to}&filters=${filters}`);
      return res.body
        .toString("utf8")
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line))
        .filter((e) => !/^(exec_|attach|resize|top|archive-path|extract-to-dir)/.test(e.Action))
        .map((e) => (e.Action === "die" ? { action: e.Action, exitCode: Number(e.Actor.Attributes.exitCode) } : { action: e.Action }));
    },
    /** The engine's clock now, in seconds to the millisecond: where to start reading events. */
    now: () => (Date.now() / 1000).toFixed(3),
    /** `docker pause` / `docker unpause`. */
    pause: (id) => ok("POST", `/containers/${id}/pause`),
    unpause: (id) => ok("POST", `/containers/${id}/unpause`),
    /**
     * Kills a container's first process from outside the engine, as a crash
     * would; resolves with the exit code the engine saw.
     */
    async crash(id, signal = "SIGKILL") {
      const since = this.now();
      process.kill((await inspect(id)).pid, signal);
      const died = await until(`container ${id} to exit`, async () => (await this.eventsOf(id, since)).find((e) => e.action === "die"));
      return died.exitCode;
    },
    /**
     * The sandbox image under a name of the suite's own, `duet-sandbox:{suite}`:
     * what a suite swaps (see `build` and `untag`) no other suite sees.
     */
    async imageFor(suite) {
      const name = `duet-sandbox:${suite}`;
      await this.tag(SANDBOX_IMAGE, name);
      return name;
    },
    /**
     * Builds image `tag` from a Dockerfile given as text (no context), e.g.
     * the sandbox image with another ENTRYPOINT.
     */
    build(tag, dockerfile) {
      execFileSync("docker", ["build", "-q", "-t", tag, "-"], { input: dockerfile, env: { ...process.env, DOCKER_HOST: host, DOCKER_BUILDKIT: "0" }, stdio: ["pipe", "ignore", "inherit"], timeout: 120_000 });
    },
    /** `docker image inspect`: { id, entrypoint } of the image `name` names, or undefined when none. */
    async inspectImage(name) {
      const res = await api("GET", `/images/${encodeURIComponent(name)}/json`);
      if (res.status === 404) return undefined;
      if (res.status !== 200) throw new Error(`inspect image ${name}: ${res.status}`);
      return { id: res.json.Id, entrypoint: res.json.Config.Entrypoint };
    },
    /**
     * Builds image `tag`: the sandbox image whose ENTRYPOINT (the Dockerfile's
     * sandboxd) has `args` after it, and starts `delaySeconds` late when given.
     */
    async variant(tag, { args = [], delaySeconds = 0 } = {}) {
      let entrypoint = [...(await this.inspectImage(SANDBOX_IMAGE)).entrypoint, ...args];
      if (delaySeconds) entrypoint = ["/bin/sh", "-c", `sleep ${delaySeconds}; exec "$0" "$@"`, ...entrypoint];
      this.build(tag, `FROM ${SANDBOX_IMAGE}\nENTRYPOINT ${JSON.stringify(entrypoint)}\n`);
    },
    /** `docker tag`: `tag` names the image `source` names. */
    tag: (source, tag) => {
      const [repo, version] = tag.split(":");
      return ok("POST", `/images/${encodeURIComponent(source)}/tag?repo=${encodeURIComponent(repo)}&tag=${encodeURIComponent(version)}`);
    },
    /** `docker rmi` of one name: the image stays while another name has it. */
    untag: (tag) => ok("DELETE", `/images/${encodeURIComponent(tag)}?noprune=1`),
    /**
     * Follows the engine's container creations from now on, for a suite's
     * cleanup: resolves, once the engine streams them, with `removeAll()`,
     * which removes every container of `images` and the sidecar of each one
     * created meanwhile (`{name}-proxy`, which workerd keeps while the
     * container is gone between a sleep and a wake, and whose own image all
     * suites share).
     */
    follow(...images) {
      const names = new Set();
      const filters = encodeURIComponent(JSON.stringify({ type: ["container"], event: ["create"] }));
      return new Promise((resolve, reject) => {
        const req = http.get({ socketPath, path: `/events?filters=${filters}` }, (res) => {
          let rest = "";
          res.setEncoding("utf8");
          res.on("data", (chunk) => {
            const lines = (rest + chunk).split("\n");
            rest = lines.pop();
            for (const { Actor } of lines.filter(Boolean).map((line) => JSON.parse(line))) if (images.includes(Actor.Attributes.image)) names.add(Actor.Attributes.name);
          });
          res.on("error", () => {});
          resolve({
            removeAll: async () => {
              await this.removeAll(...images);
              req.destroy();
              for (const name of names) {
                const sidecar = await inspect(`${name}-proxy`);
                if (sidecar?.image === SIDECAR_IMAGE) await api("DELETE", `/containers/${sidecar.id}?force=true&v=true`);
              }
            },
          });
        });
        req.on("error", reject);
      });
    },
    /** Removes every container of the images given, as a suite's cleanup. */
    async removeAll(...images) {
      for (const image of images) for (const c of await this.containersOf(image)) await api("DELETE", `/containers/${c.id}?force=true&v=true`);
    },
  };
}

/**
 * A worker whose rooms run on the tests' engine, each in a container of
 * `suite`'s own tag of the sandbox image (the sidecar for its egress);
 * `stop` stops the worker, then removes the containers and the tag.
 */
export async function startContainerWorker(suite, options = {}) {
  const engine = startEngine();
  const image = await engine.imageFor(suite);
  const cleanup = await engine.follow(image);
  const worker = await startWorker({ ...options, container: { socketPath: engine.socketPath, imageName: image, egressImage: SIDECAR_IMAGE } });
  return {
    engine,
    image,
    worker,
    async stop() {
      await worker.stop();
      await cleanup.removeAll();
      await engine.untag(image).catch(() => {});
    },
  };
}
