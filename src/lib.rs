//! Duet's backend, a Cloudflare Worker. Requests enter at [`front`], which
//! routes `/api/rooms/{roomId}/...` to the room's [`agent::DuetAgent`] (chat
//! and history) or [`sandbox::Sandbox`] (the room's shell, run by sandboxd in
//! a container).
//!
//! The folders are floors, each using only those below it:
//!
//! ```text
//! front                      the Worker: token, origin, routing, hand-off
//! agent   sandbox            the two Durable Objects of a room
//! room    chat   ai   web    the room layer both objects share; what the
//! mcp                        model is told and how it is asked; the page;
//!                            the room as an MCP server, as plain data
//! api     runtime   text     the public contract as data; runtime glue
//! ```
//!
//! - [`api`]: the public API as plain data: routes, limits, wire types, errors;
//! - [`room`]: what a room's two objects share: the calls between them and
//!   the room's clock; `sandbox` knows nothing of `agent` or `chat`, and
//!   `agent` reaches the Sandbox object only through `room`;
//! - [`chat`]: what the model is told, and its `<run>` tags;
//! - [`ai`]: the model backends;
//! - [`mcp`]: the Model Context Protocol a room speaks to other agents;
//! - [`runtime`]: glue to the Workers runtime;
//! - beneath them all, the `duet_wire` crate: the wire to sandboxd, which
//!   sandboxd builds too (a command's request and result among it).
//!
//! The entry points (the Worker's `fetch` and the two objects' methods) take
//! the runtime's own `Request` and answer its own `Response`, and the objects
//! declare their methods with `wasm_bindgen` rather than `#[durable_object]`:
//! the `worker` crate's `Request` reads every request's `cf` properties, which
//! the runtime builds on first read, and copies its URL and headers, all for
//! requests that are mostly passed on or read once. Measured on a warm
//! `/health`, that was a tenth of the Worker's CPU. Inside, the code keeps
//! `worker`'s types where they cost nothing extra.

pub mod agent;
pub mod ai;
pub mod api;
pub mod chat;
pub mod front;
pub mod mcp;
pub mod room;
pub mod runtime;
pub mod sandbox;
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
