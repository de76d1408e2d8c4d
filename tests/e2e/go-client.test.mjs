// The Go server's view: a Go program decodes every kind of response into
// structs with int64 timestamps (a ts like 1.7644e12 would break it).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { test } from "node:test";

import { ROOT, startSandboxd, startWorker } from "./support/stack.mjs";

test("a Go client decodes the responses", { timeout: 180_000 }, async () => {
  const sandboxd = await startSandboxd();
  const worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url } });
  try {
    const { stdout } = await promisify(execFile)("go", ["run", path.join(ROOT, "tests/go/decode.go"), worker.url, "0b6e7f0e-3c1a-4a43-9d0e-6f5f2b1c9a10"], {
      env: { ...process.env, GO111MODULE: "off", GOCACHE: path.join(ROOT, "target/go-cache") },
    }).catch((e) => ({ stdout: `${e.stdout}${e.stderr}` }));
    assert.equal(stdout.trim(), "ok");
  } finally {
    await worker.stop();
    await sandboxd.stop();
  }
});
