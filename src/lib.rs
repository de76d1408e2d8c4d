//! Duet's backend, a Cloudflare Worker. Requests enter at [`front`], which
//! routes `/api/rooms/{roomId}/...` to the room's [`agent::DuetAgent`] (chat
//! and history) or [`sandbox::Sandbox`] (the room's shell, run by sandboxd in
//! a container).
//!
//! - [`api`]: the public API as plain data: routes, limits, wire types, errors;
//! - [`chat`]: what the model is told, and its `<run>` tags;
//! - [`ai`]: the model backends;
//! - [`runtime`]: glue to the Workers runtime.
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
