// What an image's ENTRYPOINT does, and its launch as the engine execs a
// container's first process: the environment from `Config.Env`, the
// container's root directory as working directory, and a process group of
// its own, so that the container's processes can be signalled together.
import { spawn } from "node:child_process";
import path from "node:path";

import { ROOT } from "../stack.mjs";

/** The port sandboxd listens on in its network namespace. */
export const SANDBOX_PORT = 8080;

// The entrypoint kinds. `port` is the host port standing for port 8080 of
// the container's network namespace; `extra`, the words after the kind's
// name (an image of kind "sandboxd --max-restore-bytes=1000").
const ENTRYPOINTS = {
  // The Duet sandbox image.
  sandboxd: ({ port, root, extra }) => [path.join(ROOT, "target/release/sandboxd"), ["--listen", `127.0.0.1:${port}`, "--root", root, ...extra]],
};

/** Starts the first process of container `c` (of an entrypoint kind); the tail of its stderr is kept in `c.log`. */
export function spawnEntrypoint(c) {
  const [kind, ...extra] = c.kind.split(" ");
  const [cmd, args] = ENTRYPOINTS[kind]({ port: c.port, root: c.root, extra });
  const env = { PATH: process.env.PATH, LANG: "C.UTF-8" };
  for (const kv of c.config.Env ?? []) {
    const i = kv.indexOf("=");
    if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  const child = spawn(cmd, args, { cwd: c.root, env, detached: true, stdio: ["ignore", "ignore", "pipe"] });
  c.log = "";
  child.stderr.on("data", (chunk) => {
    c.log = (c.log + chunk).slice(-4000);
  });
  child.once("error", (e) => {
    c.log += `\n${e.message}`;
  });
  return child;
}
