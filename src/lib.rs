//! Duet's backend, a Cloudflare Worker. Requests enter at [`front`], which
//! routes `/api/rooms/{roomId}/...` to the room's [`agent::DuetAgent`] (chat
//! and history) or [`sandbox::Sandbox`] (the room's shell, run by sandboxd in
//! a container).
//!
//! The folders are floors, each using only those below it (a test,
//! `tests/floors.rs`, reads this table and holds the code to it):
//!
//! ```text
//! front                  the Worker: host, token, route, hand-off
//! agent sandbox          the room's two Durable Objects: what each serves
//! exchange mcp           an exchange's rounds; the room as an MCP server
//! room                   the typed calls between the two objects; the clock
//! feed                   the live feed: events, the room's log, fan-out
//! access approvals      roles and tokens; policy, approvals, the audit;
//! jobs files terminal    jobs; the workspace's files; the shared terminal
//! ai web                 the model backends and their input; the page
//! runtime                glue to the Workers runtime
//! api                    the HTTP contract as data
//! base64url text         plain helpers
//! ```
//!
//! - [`access`]: roles, room tokens, invites' signing, the one reader of a
//!   request's token, the room's token generation;
//! - [`approvals`]: the room's policy, the commands waiting for a writer,
//!   what the room said of a command, the audit;
//! - [`jobs`]: the room's jobs, commands that outlive a request: their
//!   shape, bounds and table;
//! - [`files`]: the workspace's files by path: what a change is and how
//!   the room names it;
//! - [`terminal`]: the room's shared terminal: its frames, and what of a
//!   writer's typing goes on record;
//! - [`feed`]: what watchers receive and send, the room's log, fan-out;
//! - [`room`]: the calls between the two objects and the room's clock;
//!   `sandbox` knows nothing of `agent` or `exchange`, and `agent` reaches
//!   the Sandbox object only through `room`;
//! - [`exchange`]: one message's exchange with the model: what it is told,
//!   its rounds, its `<run>` tags and tool calls, its time budget;
//! - [`ai`]: the model backends and the model's input types;
//! - [`mcp`]: the Model Context Protocol a room speaks to other agents;
//! - [`api`]: the public HTTP contract as plain data: routes, errors,
//!   limits, JSON shapes, validation, cross-site rules;
//! - [`runtime`]: glue to the Workers runtime;
//! - beneath them all, the `duet_wire` crate: the wire to sandboxd, which
//!   sandboxd builds too (a command's request and result among it).
//!
//! Each concept's folder holds its pure core, tested natively, beside the
//! thin glue it needs (its own SQLite table, the runtime's sockets).
//!
//! The entry points (the Worker's `fetch` and the two objects' methods) take
//! the runtime's own `Request` and answer its own `Response`, and the objects
//! declare their methods with `wasm_bindgen` rather than `#[durable_object]`:
//! the `worker` crate's `Request` reads every request's `cf` properties, which
//! the runtime builds on first read, and copies its URL and headers, all for
//! requests that are mostly passed on or read once. Measured on a warm
//! `/health`, that was a tenth of the Worker's CPU. Inside, the code keeps
//! `worker`'s types where they cost nothing extra.

pub mod access;
pub mod agent;
pub mod ai;
pub mod api;
pub mod approvals;
pub mod base64url;
pub mod exchange;
pub mod feed;
pub mod files;
pub mod front;
pub mod jobs;
pub mod mcp;
pub mod room;
pub mod runtime;
pub mod sandbox;
pub mod terminal;
pub mod text;
pub mod web;

pub use agent::DuetAgent;
pub use sandbox::Sandbox;

#[worker::event(start)]
fn start() {
    runtime::microtasks::wake_by_promise_jobs();
}

#[worker::event(fetch)]
async fn fetch(
    req: worker::web_sys::Request,
    env: worker::Env,
    _ctx: worker::Context,
) -> worker::Result<worker::web_sys::Response> {
    Ok(front::handle(req, env).await)
}
