//! DuetAgent, one Durable Object per room (named by the room id): the
//! room's history, its exchanges with the model, its invites, its policy
//! and the approvals that wait, and the room as an MCP server. Each
//! concept's own logic lives in its folder (`exchange`, `access`,
//! `approvals`, `mcp`); here is what the object does with it, in layers
//! that call only downwards:
//!
//! - [`DuetAgent::handle`], the table of contents: one line per thing asked
//!   of the object (`room::calls` says which object serves what);
//! - the actions: [`invites`], the policy and the decisions ([`decisions`],
//!   with the alarm that expires approvals and carries on the exchanges
//!   whose approvals are decided), MCP's tool calls ([`mcp`]);
//! - [`exchange`]: a message's exchange run, stored and published, or a
//!   decided one carried on; both end the same way;
//! - [`upkeep`]: the room's use and its one alarm, its policy, publishing
//!   to its feed; and [`store`], the history's table.
//!
//! Cleanup is final: each cleanup starts a new epoch of the room's clock
//! (`room::clock`), and an exchange that began in an earlier one runs no
//! further command and stores nothing (it answers 409), so nothing from
//! before a `DELETE` reappears after it.

mod decisions;
mod exchange;
mod invites;
mod mcp;
mod store;
mod upkeep;

use std::cell::Cell;

use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsValue};
use worker::worker_sys::DurableObjectState;
use worker::{web_sys, Env, Response, State};

use crate::access::generation::Generation;
use crate::access::request;
use crate::api::route;
use crate::api::shapes::{ApprovalsResponse, CleanupResponse, HistoryResponse};
use crate::api::{validate, ApiError};
use crate::approvals::pending::Approvals;
use crate::room::calls::SandboxObject;
use crate::room::calls::{self, Served, ToAgent};
use crate::room::clock::{RoomClock, Timing};
use crate::runtime::{body, clock, log, respond};
use store::Store;

#[wasm_bindgen]
pub struct DuetAgent {
    state: State,
    store: Store,
    env: Env,
    timing: Timing,
    clock: RoomClock,
    generation: Generation,
    approvals: Approvals,
    /// MCP tool calls in flight (`mcp`).
    mcp_calls: Cell<usize>,
}

/// The runtime's entry points (by hand: see the crate docs).
#[wasm_bindgen(wasm_bindgen_futures = worker::wasm_bindgen_futures, js_sys = worker::js_sys)]
impl DuetAgent {
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> Self {
        let state = State::from(state);
        let store = Store::open(state.storage().sql()).expect("the messages table can be created");
        let generation =
            Generation::open(state.storage().sql()).expect("the access table can be created");
        let approvals =
            Approvals::open(state.storage().sql()).expect("the approvals tables can be created");
        Self {
            generation,
            approvals,
            state,
            store,
            timing: Timing::of(&env),
            env,
            clock: RoomClock::default(),
            mcp_calls: Cell::new(0),
        }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> web_sys::Response {
        let url = req.url();
        let outcome = self.handle(req, &url).await;
        respond::from_object("DuetAgent", route::path_of(&url), outcome).into()
    }

    pub async fn alarm(&self) -> Result<(), JsValue> {
        self.clock.alarm_spent();
        self.decide_due()
            .await
            .map_err(|e| JsValue::from_str(&e.to_string()))?;
        Ok(self.expire().await?)
    }
}

impl DuetAgent {
    /// The room expires `ROOM_TTL_SECONDS` after its last use.
    async fn expire(&self) -> worker::Result<()> {
        let Some((room, last_used)) = self.store.last_use()? else {
            return Ok(());
        };
        let expires = last_used.saturating_add(self.timing.ttl_ms);
        let now = clock::now_ms();
        if now < expires {
            let at = self.next_alarm(expires, now)?;
            return self.clock.alarm_at(&self.state.storage(), at).await;
        }
        // What the watchers show is gone: the feed tells them, closes and
        // forgets its log, and the room's tokens end there too. Told first,
        // as a failure fails the alarm, which the runtime then retries.
        let sandbox = SandboxObject::of(&self.env, &room)
            .map_err(|e| worker::Error::RustError(e.to_string()))?;
        sandbox
            .history_expired()
            .await
            .map_err(worker::Error::RustError)?;
        self.clock.forget();
        self.store.clear()?;
        self.approvals.forget()?;
        self.generation.set(None)?;
        log::lifecycle("expire", "DuetAgent", &room, now, None, None);
        Ok(())
    }

    /// What each request asks, and the function that answers it.
    async fn handle(&self, req: web_sys::Request, url: &str) -> Result<Response, ApiError> {
        let asked = calls::request(&req.method(), route::path_of(url))?;
        let claims = request::claims(&req, &self.env)?;
        if asked.public {
            self.generation.admit(claims.as_ref())?;
        }
        let Served::Agent(what) = asked.served else {
            return Err(ApiError::NotFound);
        };
        let (room, claims) = (&asked.room, claims.as_ref());
        match what {
            ToAgent::SendMessage => self.send(room, &body::read(req).await?).await,
            ToAgent::History => self.history(room).await,
            ToAgent::Cleanup => self.cleanup(room).await,
            ToAgent::Invite => {
                self.invite(room, url, claims, &body::read(req).await?)
                    .await
            }
            ToAgent::Revoke => self.revoke(room, url, claims).await,
            ToAgent::Policy => Ok(respond::json(200, &self.policy()?)?),
            ToAgent::SetPolicy => self.set_policy(room, &body::read(req).await?).await,
            ToAgent::Approvals => self.pending(),
            ToAgent::Decide { approval } => {
                self.decide(room, approval, &body::read(req).await?, claims)
                    .await
            }
            ToAgent::Mcp => self.mcp(room, req, claims).await,
            ToAgent::Watching => self.set_watching(&body::read(req).await?),
        }
    }

    /// `POST …/message`: the exchange, answered with the reply, the room's
    /// recent messages and the approvals it waits for.
    async fn send(&self, room: &str, body: &[u8]) -> Result<Response, ApiError> {
        self.touch(room).await?;
        let request = validate::message_request(body)?;
        Ok(respond::json_text(200, self.answer(room, request).await?)?)
    }

    /// The stored history; a new watcher's counts as a use, as a read of it
    /// does.
    async fn history(&self, room: &str) -> Result<Response, ApiError> {
        self.touch(room).await?;
        let messages = self.store.recent()?;
        Ok(respond::json(
            200,
            &HistoryResponse {
                messages: &messages,
            },
        )?)
    }

    /// The approvals that wait.
    fn pending(&self) -> Result<Response, ApiError> {
        let approvals = self.approvals.pending()?;
        Ok(respond::json(
            200,
            &ApprovalsResponse {
                approvals: &approvals,
            },
        )?)
    }

    /// Whether the room's feed has watchers, as the Sandbox object says.
    fn set_watching(&self, body: &[u8]) -> Result<Response, ApiError> {
        self.store.set_watching(body == b"true")?;
        Ok(Response::empty()?)
    }

    async fn cleanup(&self, room: &str) -> Result<Response, ApiError> {
        self.clock.forget();
        self.store.clear()?;
        self.approvals.forget()?;
        // The Sandbox object forgets its copy as it is destroyed.
        self.generation.set(None)?;
        self.state.storage().delete_alarm().await?;
        let errors: Vec<String> = match SandboxObject::of(&self.env, room)?.destroy().await {
            Ok(()) => vec![],
            Err(e) => vec![format!("sandbox: {e}")],
        };
        let (status, room_id) = if errors.is_empty() {
            (200, Some(room))
        } else {
            (207, None)
        };
        Ok(respond::json(
            status,
            &CleanupResponse {
                cleaned: true,
                room_id,
                errors: &errors,
            },
        )?)
    }
}

/// A response body as JSON text, for the routes and tools that answer one.
fn written<T: serde::Serialize>(value: &T) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(|e| ApiError::Internal(e.to_string()))
}
