// The API's limits as the JavaScript tests and tools see them: the
// `x-limits` of docs/openapi.yaml, which tests/openapi.rs keeps equal to
// src/api/limits.rs. The block is flat `name: integer` lines.
import fs from "node:fs";
import path from "node:path";

import { ROOT } from "./stack.mjs";

function xLimits() {
  const text = fs.readFileSync(path.join(ROOT, "docs/openapi.yaml"), "utf8");
  const block = /^ {2}x-limits:\n((?: {4}\w+: \d+\n)+)/m.exec(text);
  if (!block) throw new Error("docs/openapi.yaml has no x-limits block");
  return Object.fromEntries(block[1].trim().split("\n").map((line) => {
    const [name, value] = line.trim().split(": ");
    return [name, Number(value)];
  }));
}

export const LIMITS = xLimits();
