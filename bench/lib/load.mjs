// A small closed-loop load generator on Node's fetch (undici, keep-alive
// connections), plus the statistics the reports use.

/** Runs `request(i, slot)` `count` times from `concurrency` loops, stopping early after `maxMs`. */
export async function load({ count, concurrency, maxMs = 30_000, request }) {
  const latencies = [];
  let next = 0;
  let errors = 0;
  let firstError = null;
  const started = performance.now();
  const deadline = started + maxMs;
  async function loop(slot) {
    while (next < count && performance.now() < deadline) {
      const i = next++;
      const t = performance.now();
      try {
        await request(i, slot);
        latencies.push(performance.now() - t);
      } catch (e) {
        errors++;
        firstError ??= String(e?.message ?? e);
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, (_, slot) => loop(slot)));
  const elapsedMs = performance.now() - started;
  return { concurrency, requested: count, completed: latencies.length, errors, firstError, elapsedMs: round(elapsedMs), throughput: round((latencies.length / elapsedMs) * 1000, 1), ...stats(latencies) };
}

/** Open loop: one request every `intervalMs` for `count` requests, whatever the previous ones do. */
export async function paced({ count, intervalMs, request }) {
  const samples = [];
  const started = performance.now();
  const pending = [];
  for (let i = 0; i < count; i++) {
    const due = started + i * intervalMs;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const at = performance.now();
    pending.push(
      request(i).then(
        () => samples.push({ atMs: at - started, ms: performance.now() - at, lagMs: at - due }),
        (e) => samples.push({ atMs: at - started, error: String(e?.message ?? e) }),
      ),
    );
  }
  await Promise.all(pending);
  return samples.sort((a, b) => a.atMs - b.atMs);
}

export function stats(values) {
  const v = [...values].sort((a, b) => a - b);
  const q = (p) => (v.length ? round(v[Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1))]) : null);
  return {
    n: v.length,
    p50: q(50),
    p95: q(95),
    p99: q(99),
    min: v.length ? round(v[0]) : null,
    max: v.length ? round(v[v.length - 1]) : null,
    mean: v.length ? round(v.reduce((a, b) => a + b, 0) / v.length) : null,
  };
}

/** `promise`, or a rejection naming `what` after `ms`. */
export function bounded(promise, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

export function median(values) {
  return stats(values).p50;
}

export function round(x, digits = 3) {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** fetch that fails on a non-2xx status and reads the whole body. */
export async function call(url, init = {}) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
  const body = await res.text();
  if (!res.ok) throw new Error(`${init.method ?? "GET"} ${url}: ${res.status} ${body.slice(0, 200)}`);
  return body;
}

export function postJson(url, value, headers = {}) {
  return call(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(value) });
}
