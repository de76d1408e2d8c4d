//! Duet's backend, a Cloudflare Worker. Requests enter at [`front`], which
//! routes `/api/rooms/{roomId}/...` to the room's [`agent::DuetAgent`] (chat
//! and history) or [`sandbox::Sandbox`] (the room's shell, run by sandboxd in
//! a container).
//!
//! - [`api`]: the public API as plain data: routes, limits, wire types, errors;
//! - [`chat`]: what the model is told, and its `<run>` tags;
//! - [`ai`]: the model backends;
//! - [`runtime`]: glue to the Workers runtime.

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

#[worker::event(fetch)]
async fn fetch(
    req: worker::Request,
    env: worker::Env,
    _ctx: worker::Context,
) -> worker::Result<worker::Response> {
    Ok(front::handle(req, env).await)
}
