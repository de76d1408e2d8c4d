//! Room sandboxes: the Sandbox Durable Object (`sandbox-{roomId}`), which
//! drives sandboxd in a container, and the typed client the rest of the
//! Worker uses to reach it.

mod feed;
pub mod lifecycle;
mod object;
mod sandboxd;
mod saved;
mod stream;

pub use object::Sandbox;

use worker::{Env, Method};

use crate::api::route::{self, Action};
use crate::api::wire::{sandbox_name, ExecOutput, ExecRequest, ExecResponse};
use crate::api::{validate, ApiError};
use crate::chat::budget::command_budget;
use crate::chat::run_tags::Outcome;
use crate::runtime::{bindings, clock, internal, timeout};

/// The Sandbox object of a room.
pub fn sandbox_stub(env: &Env, room: &str) -> worker::Result<worker::Stub> {
    bindings::durable_objects(env, "Sandbox")?.get_by_name(&sandbox_name(room))
}

/// A typed handle on one room's Sandbox object.
pub struct SandboxStub(worker::Stub);

impl SandboxStub {
    pub fn for_room(env: &Env, room: &str) -> Result<Self, ApiError> {
        Ok(Self(sandbox_stub(env, room)?))
    }

    /// Runs a command from a `<run>` tag; the whole call ends by `deadline`
    /// (epoch milliseconds), container start included.
    pub async fn run(&self, room: &str, cmd: &str, deadline: u64) -> Outcome {
        if let Err(why) = validate::command(cmd) {
            return Outcome::Failed(format!("command {why}"));
        }
        let left = deadline.saturating_sub(clock::now_ms());
        let Some(budget) = command_budget(left) else {
            return Outcome::Failed("not run: the reply's time budget is spent".into());
        };
        let request = ExecRequest {
            cmd: cmd.to_owned(),
            timeout_ms: budget.timeout_ms,
        };
        timeout::within(budget.wait_ms, self.exec(room, &request))
            .await
            .unwrap_or_else(|| {
                Outcome::Failed(format!(
                    "the sandbox did not answer within {} ms",
                    budget.wait_ms
                ))
            })
    }

    async fn exec(&self, room: &str, request: &ExecRequest) -> Outcome {
        let body = serde_json::to_vec(request).expect("an exec request serializes");
        // An internal route: the live feed shows the command as the agent's.
        let path = route::internal_path(room, Action::AgentExec);
        let mut response = match internal::send(&self.0, Method::Post, &path, Some(&body)).await {
            Ok(response) => response,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        if response.status_code() != 200 {
            return Outcome::Failed(internal::error_of(response).await);
        }
        match response.json::<ExecResponse<ExecOutput>>().await {
            Ok(ExecResponse { result, .. }) => Outcome::Ran(result),
            Err(e) => Outcome::Failed(format!("unexpected sandbox answer: {e}")),
        }
    }

    /// Ends the room's shell and removes its files.
    pub async fn destroy(&self, room: &str) -> Result<(), String> {
        let response = internal::send(&self.0, Method::Delete, &format!("/api/rooms/{room}"), None)
            .await
            .map_err(|e| e.to_string())?;
        match response.status_code() {
            200 => Ok(()),
            _ => Err(internal::error_of(response).await),
        }
    }
}
