//! The Sandbox Durable Object. It owns no state of its own: the shell and the
//! files live in sandboxd. It validates commands, finds sandboxd (its
//! container, or `SANDBOX_URL` where there is none), and bounds every call.

use std::rc::Rc;

use worker::{durable_object, DurableObject, Env, Request, Response, State};

use super::sandboxd::{Health, Sandboxd};
use crate::api::route::{self, Action};
use crate::api::wire::{sandbox_name, ExecResponse};
use crate::api::{validate, ApiError};
use crate::runtime::{body, respond};

#[durable_object]
pub struct Sandbox {
    state: State,
    env: Env,
    health: Rc<Health>,
}

impl DurableObject for Sandbox {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            health: Rc::default(),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let outcome = self.handle(&mut req).await;
        Ok(respond::from_object("Sandbox", &req.path(), outcome))
    }
}

impl Sandbox {
    async fn handle(&self, req: &mut Request) -> Result<Response, ApiError> {
        let (room, action) = route::room(req.method().as_ref(), &req.path())?;
        let name = sandbox_name(&room);
        match action {
            Action::Exec => {
                let request = validate::exec_request(&body::read(req).await?)?;
                let result = self.sandboxd()?.exec(&name, &request).await?;
                Ok(respond::json(
                    200,
                    &ExecResponse {
                        result,
                        sandbox_name: name,
                    },
                )?)
            }
            Action::Cleanup => {
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
        Sandboxd::locate(&self.state, &self.env, &self.health)
    }
}
