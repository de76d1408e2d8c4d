// The web page in a real browser (Debian's Chromium, driven by
// playwright-core): two people in one room; one sends a message and runs a
// command that prints a line a second; the other sees the message, and each
// line as it is printed, not all at the end.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { chromium } from "playwright-core";

import { ROOT, startSandboxd, startWorker, tempDir } from "./support/stack.mjs";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
// As a sandboxed machine runs it: no GPU, no network but loopback, no setuid sandbox as root.
const ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

describe("the web page", () => {
  let sandboxd, worker, browser;
  before(async () => {
    sandboxd = await startSandboxd();
    worker = await startWorker({ vars: { SANDBOX_URL: sandboxd.url } });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
  });
  after(async () => {
    await browser?.close();
    await worker?.stop();
    await sandboxd?.stop();
  });

  async function open(room, name) {
    const context = await browser.newContext({ viewport: { width: 1100, height: 700 } });
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${worker.url}/rooms/${room}`);
    await page.waitForFunction(() => document.getElementById("status").textContent === "live");
    await page.fill("#name", name);
    return { page, errors };
  }

  test("the home page enters a room", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${worker.url}/`);
    await page.getByLabel("Room id").fill("from-home");
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/rooms\/from-home$/);
    assert.equal(await page.textContent("#room-id"), "from-home");
    await context.close();
  });

  test("a second person sees the message and every line of a command as it comes", async () => {
    const room = randomUUID();
    const [a, b] = [await open(room, "ana"), await open(room, "bo")];
    await a.page.getByLabel("Message to the agent").fill("hello from ana");
    await a.page.keyboard.press("Enter");
    await b.page.waitForFunction(() => document.getElementById("chat").textContent.includes("echo: hello from ana"));
    assert.match(await b.page.textContent("#chat"), /ana: hello from ana/);

    await a.page.getByLabel("Shell command").fill("for i in 1 2 3; do echo $i; sleep 1; done");
    await a.page.keyboard.press("Enter");
    const seen = {};
    for (const line of ["1", "2", "3"]) {
      await b.page.waitForFunction((l) => document.getElementById("term").textContent.includes(`${l}\n`), line, { timeout: 10_000 });
      seen[line] = Date.now();
    }
    await b.page.waitForFunction(() => document.getElementById("term").textContent.includes("[exit 0]"));
    assert.ok(seen["3"] - seen["1"] >= 1500, `lines arrived ${seen["3"] - seen["1"]} ms apart: they stream`);
    assert.match(await b.page.textContent("#term"), /\$ for i in 1 2 3; do echo \$i; sleep 1; done\n1\n2\n3\n\[exit 0\]/);
    assert.deepEqual([...a.errors, ...b.errors], []);

    // The picture in the README.
    const shot = path.join(tempDir("page"), "room.png");
    await b.page.screenshot({ path: shot });
    if (process.env.DUET_SCREENSHOT) fs.copyFileSync(shot, path.join(ROOT, "docs/room.png"));
    assert.ok(fs.statSync(shot).size > 10_000);
  });

  test("the page is usable by keyboard and labelled", async () => {
    const { page } = await open(randomUUID(), "kim");
    for (const label of ["Your name", "Message to the agent", "Shell command"]) {
      assert.equal(await page.getByLabel(label).count(), 1, label);
    }
    await page.focus("#text");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.textContent), "Send");
  });
});
