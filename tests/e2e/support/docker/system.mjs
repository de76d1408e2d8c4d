// What the engine says it is (API 1.47, Docker 27): the daemon's version
// middleware (a `/v1.xx` path prefix; versions outside 1.24..1.47 refused
// with 400), the headers clients negotiate from (`Api-Version`,
// `Docker-Experimental`, `Ostype`, `Builder-Version`, `Swarm`), `GET
// /version`, and `GET /info` (the Docker CLI's `docker info`, which
// Miniflare runs to learn from `SecurityOptions` whether the engine is
// rootless; this one is a rootful engine).
import os from "node:os";

import { DockerError } from "./engine.mjs";

const ENGINE_VERSION = "27.3.1";
const API_VERSION = "1.47";
const MIN_API_VERSION = "1.24";

/** What `/_ping` answers with. */
export const PING_HEADERS = { "Cache-Control": "no-cache, no-store, must-revalidate", Pragma: "no-cache", "Builder-Version": "2", Swarm: "inactive" };
/** What the daemon's middlewares put on every answer. */
export const COMMON_HEADERS = { "Api-Version": API_VERSION, "Docker-Experimental": "false", Ostype: "linux", Server: `Docker/${ENGINE_VERSION} (linux)` };

/** Compares two "major.minor" API versions. */
function compareVersions(a, b) {
  const [x, y] = [a, b].map((v) => v.split(".").map(Number));
  return x[0] - y[0] || x[1] - y[1];
}

/** The daemon's version middleware: `pathname` without its optional /v1.xx prefix, refused when the version is out of bounds. */
export function unversioned(pathname) {
  const versioned = /^\/v(\d+\.\d+)(\/.*)$/.exec(pathname);
  if (!versioned) return pathname;
  const v = versioned[1];
  if (compareVersions(v, MIN_API_VERSION) < 0) throw new DockerError(400, `client version ${v} is too old. Minimum supported API version is ${MIN_API_VERSION}, please upgrade your client to a newer version`);
  if (compareVersions(v, API_VERSION) > 0) throw new DockerError(400, `client version ${v} is too new. Maximum supported API version is ${API_VERSION}`);
  return versioned[2];
}

/** `GET /version`. */
export const version = () => ({ Version: ENGINE_VERSION, ApiVersion: API_VERSION, MinAPIVersion: MIN_API_VERSION, Os: "linux", Arch: os.machine() === "aarch64" ? "arm64" : "amd64", KernelVersion: os.release(), Experimental: false });

/** `GET /info`: a rootful engine on this host. */
export function info(engine) {
  const all = [...engine.containers.values()];
  const count = (...states) => all.filter((c) => states.includes(c.status)).length;
  return {
    ID: "DUET:FAKE:ENGINE",
    Containers: all.length,
    ContainersRunning: count("running", "restarting"),
    ContainersPaused: count("paused"),
    ContainersStopped: count("created", "exited", "removing"),
    Images: engine.imageKinds.size + 1,
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
