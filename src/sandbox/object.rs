//! The Sandbox Durable Object. It owns no state of its own: the shell and the
//! files live in sandboxd. It validates commands, finds sandboxd (its
//! container, or `SANDBOX_URL` where there is none), and bounds every call.
//!
//! Cleanup is final: a command that arrived before a cleanup but had not
//! reached sandboxd when it began (waiting for its body or for the
//! container) is not sent (409); one already in sandboxd is ended by the
//! destroy (sandboxd cancels it, or the container goes).

use std::cell::Cell;
use std::rc::Rc;

use worker::{durable_object, DurableObject, Env, Request, Response, State};

use super::sandboxd::{ContainerState, Sandboxd};
use crate::api::route::{self, Action};
use crate::api::wire::{sandbox_name, ExecResponse};
use crate::api::{validate, ApiError};
use crate::runtime::{body, respond};

#[durable_object]
pub struct Sandbox {
    state: State,
    env: Env,
    container: Rc<ContainerState>,
    /// Cleanups so far.
    epoch: Cell<u64>,
}

impl DurableObject for Sandbox {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            container: Rc::default(),
            epoch: Cell::new(0),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let outcome = self.handle(&mut req).await;
        Ok(respond::from_object("Sandbox", &req.path(), outcome))
    }
}

impl Sandbox {
    async fn handle(&self, req: &mut Request) -> Result<Response, ApiError> {
        let epoch = self.epoch.get();
        let (room, action) = route::room(req.method().as_ref(), &req.path())?;
        let name = sandbox_name(&room);
        match action {
            Action::Exec => {
                let request = validate::exec_request(&body::read(req).await?)?;
                let sandboxd = self.sandboxd()?;
                sandboxd.start().await?;
                // Nothing awaits between this check and the command being sent.
                if self.epoch.get() != epoch {
                    return Err(ApiError::CleanedUp);
                }
                let result = sandboxd.exec(&name, &request).await?;
                Ok(respond::json(
                    200,
                    &ExecResponse {
                        result,
                        sandbox_name: name,
                    },
                )?)
            }
            Action::Cleanup => {
                self.epoch.set(self.epoch.get() + 1);
                self.sandboxd()?.destroy(&name).await?;
                Ok(respond::json(
                    200,
                    &serde_json::json!({ "destroyed": true }),
                )?)
            }
            Action::SendMessage | Action::History => Err(ApiError::NotFound),
        }
    }

    fn sandboxd(&self) -> Result<Sandboxd<'_>, ApiError> {
        Sandboxd::locate(&self.state, &self.env, &self.container)
    }
}
