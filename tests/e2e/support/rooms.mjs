// HTTP calls on a room, as the tests make them: `on` is a worker (its
// `api` is used) or any `client` of ./stack.mjs, such as one that sends a
// room token.
import assert from "node:assert/strict";

import { client } from "./stack.mjs";

const caller = (on) => (typeof on === "function" ? on : on.api);

/** A `client` of the worker at `base` that sends `token` as a bearer token (and no Authorization without one). */
export const bearer = (base, token) => client(base, token ? { authorization: `Bearer ${token}` } : {});

/** Runs `cmd` in `room`'s sandbox (POST .../sandbox/exec, `extra` in the body beside it, e.g. timeoutMs). */
export const exec = (on, room, cmd, extra = {}) => caller(on)("POST", `/api/rooms/${room}/sandbox/exec`, { cmd, ...extra });

/**
 * Invites to `room` with `role` (`extra`: name, ttlSeconds); asserts that
 * the invite was made and answers it: {token, role, expiresAt, link}.
 */
export async function invite(on, room, role, extra = {}) {
  const res = await caller(on)("POST", `/api/rooms/${room}/invites`, { role, ...extra });
  assert.equal(res.status, 200, res.text);
  return res.json;
}
