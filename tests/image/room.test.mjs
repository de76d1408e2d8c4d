// What a room relies on in the sandbox image, checked inside the image:
// scripts/image-check builds the Dockerfile, runs the image and points
// SANDBOX_URL at its published port (SANDBOX_PORT is the port sandboxd
// listens on inside, SANDBOX_ROOT its workspaces as seen from here). Every
// command runs as a room's does, in a shell of sandboxd's, as the image's user.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { before, test } from "node:test";

import { startSandboxd } from "../e2e/support/stack.mjs";

const NAME = "image-check";
let sandboxd;

before(async () => {
  assert.ok(process.env.SANDBOX_URL && process.env.SANDBOX_ROOT && process.env.SANDBOX_PORT, "run by scripts/image-check, which sets SANDBOX_URL, SANDBOX_ROOT and SANDBOX_PORT");
  sandboxd = await startSandboxd();
});

/** Runs `cmd` in the check's shell, asserts that it succeeded and answers its stdout. */
async function sh(cmd) {
  const res = await fetch(`${sandboxd.url}/v1/sandboxes/${NAME}/exec`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ cmd, timeoutMs: 120_000 }),
  });
  const result = await res.json();
  assert.equal(res.status, 200, JSON.stringify(result));
  assert.equal(result.exitCode, 0, `${cmd}: ${result.stdout}${result.stderr}`);
  return result.stdout;
}

test("commands run as sandbox in /workspace, under sandboxd, under tini as PID 1", async () => {
  assert.equal(await sh("id -un; id -gn"), "sandbox\nsandbox\n");
  assert.equal(await sh("stat -c %U:%G /workspace"), "sandbox:sandbox\n");
  assert.equal(await sh("pwd"), `/workspace/${NAME}\n`);
  assert.equal(await sh("cat /proc/$PPID/comm; ps -o ppid= -p $PPID | tr -d ' '; cat /proc/1/comm"), "sandboxd\n1\ntini\n");
});

test("what a command writes is in the workspace, owned by sandbox", async () => {
  const uid = Number(await sh("echo data > written.txt && id -u"));
  const file = path.join(process.env.SANDBOX_ROOT, NAME, "written.txt");
  assert.equal(fs.readFileSync(file, "utf8"), "data\n");
  assert.equal(fs.statSync(file).uid, uid);
  assert.notEqual(uid, 0);
});

test("git makes a repository and a commit", async () => {
  const log = await sh("(git init -q repo && cd repo && echo x > f && git add f && git -c user.name=duet -c user.email=duet@example.com commit -qm first && git log --format=%s)");
  assert.equal(log, "first\n");
});

test("curl reaches sandboxd over loopback, with the CA certificates for https", async () => {
  assert.equal(await sh(`curl -fsS http://127.0.0.1:${process.env.SANDBOX_PORT}/health`), "ok");
  await sh("test -s /etc/ssl/certs/ca-certificates.crt && curl --version | grep -q https");
});

test("python3 makes a venv with pip", async () => {
  const out = await sh("python3 -m venv venv && venv/bin/python -c 'import sys; print(sys.prefix != sys.base_prefix)' && venv/bin/pip --version");
  assert.match(out, /^True\npip \d+/);
});

test("node runs and npm makes a package", async () => {
  assert.match(await sh("node -p process.version"), /^v\d+\.\d+\.\d+\n$/);
  assert.equal(await sh("(mkdir pkg && cd pkg && npm init -y >/dev/null && node -p 'require(\"./package.json\").name')"), "pkg\n");
});

test("cc and c++ build programs that run; make and pkg-config are there", async () => {
  await sh("printf 'int main(void) { return 42; }\\n' > a.c && cc a.c -o a");
  assert.equal(await sh("./a; echo $?"), "42\n");
  assert.equal(await sh("printf '#include <iostream>\\nint main() { std::cout << \"hi\" << std::endl; }\\n' > b.cc && c++ b.cc -o b && ./b"), "hi\n");
  await sh("make --version && pkg-config --version");
});

test("the archive and text tools work", async () => {
  assert.equal(await sh("echo '{\"a\": 1}' | jq .a"), "1\n");
  assert.equal(await sh("echo z > z.txt && zip -q z.zip z.txt && unzip -p z.zip z.txt"), "z\n");
  assert.equal(await sh("echo x | xz | xz -d"), "x\n");
  assert.equal(await sh("file -b --mime-type a.c"), "text/x-c\n");
  await sh("command -v less");
});
