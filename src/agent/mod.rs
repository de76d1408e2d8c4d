//! DuetAgent, one Durable Object per room (named by the room id): it keeps the
//! room's history, and holds each exchange ([`exchange`]): the model's answers
//! and the `<run>` commands they ask for, in the room's sandbox, within the
//! exchange's time budget. An exchange is stored as one user message and one
//! agent message once it is over.
//!
//! It also holds the room's invites ([`invites`]): it makes the room's room
//! tokens and owns the generation they carry (`room::access`).
//!
//! And what the room lets the agent run ([`approvals`]): the room's policy
//! (`api::policy`), and the exchanges that wait for a writer's approval of
//! their commands. One alarm serves the room's expiry, the approvals'
//! expiry and the exchanges that are ready to go on ([`decisions`]), so all
//! of it survives the object's eviction and a restart.
//!
//! Cleanup is final: each cleanup starts a new epoch of the room's clock
//! (`room::clock`), and an exchange that began in an earlier one runs no
//! further command and stores nothing (it answers 409), so nothing from
//! before a `DELETE` reappears after it.

mod decisions;
mod invites;
mod mcp;
mod store;

use std::cell::Cell;

use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsValue};
use worker::worker_sys::DurableObjectState;
use worker::{web_sys, Env, Response, State};

use crate::access::generation::Generation;
use crate::access::request;
use crate::api::route::{self, Action};
use crate::api::wire::{
    Approval, ApprovalsResponse, CleanupResponse, HistoryResponse, Message, MessageRequest,
    MessageResponse, Role,
};
use crate::api::{validate, ApiError};
use crate::approvals::pending::Approvals;
use crate::approvals::policy::AgentCommands;
use crate::exchange::run as exchange;
use crate::feed::event::Event;
use crate::room::calls::SandboxObject;
use crate::room::clock::{RoomClock, Timing};
use crate::room::{calls, Asked, Call};
use crate::runtime::{body, clock, config, log, respond};
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

    async fn handle(&self, req: web_sys::Request, url: &str) -> Result<Response, ApiError> {
        let (room, asked) = calls::asked(&req.method(), route::path_of(url))?;
        let claims = request::claims(&req, &self.env)?;
        if let Asked::Public(_) = asked {
            self.generation.admit(claims.as_ref())?;
        }
        match asked {
            Asked::Public(Action::SendMessage) => {
                self.touch(&room).await?;
                let request = validate::message_request(&body::read(req).await?)?;
                self.send(&room, request).await
            }
            // A new watcher's history counts as a use, as a read of it does.
            Asked::Public(Action::History) | Asked::Call(Call::History) => {
                self.touch(&room).await?;
                Ok(respond::json(
                    200,
                    &HistoryResponse {
                        messages: &self.store.recent()?,
                    },
                )?)
            }
            Asked::Public(Action::Cleanup) => self.cleanup(&room).await,
            Asked::Public(Action::Invite) => {
                let body = body::read(req).await?;
                self.invite(&room, url, claims.as_ref(), &body).await
            }
            Asked::Public(Action::Revoke) => self.revoke(&room, url, claims.as_ref()).await,
            Asked::Public(Action::Policy) => Ok(respond::json(200, &self.policy()?)?),
            Asked::Public(Action::SetPolicy) => {
                let body = body::read(req).await?;
                self.set_policy(&room, &body).await
            }
            Asked::Public(Action::Approvals) => Ok(respond::json(
                200,
                &ApprovalsResponse {
                    approvals: &self.approvals.pending()?,
                },
            )?),
            Asked::Public(Action::Decide { approval }) => {
                let body = body::read(req).await?;
                self.decide(&room, approval, &body, claims.as_ref()).await
            }
            Asked::Public(Action::Mcp) => {
                let headers = req.headers();
                let named = |name| headers.get(name);
                let (version, method, name) = (
                    named("mcp-protocol-version")?,
                    named("mcp-method")?,
                    named("mcp-name")?,
                );
                let body = body::read(req).await?;
                let headers = crate::mcp::Headers {
                    protocol_version: version.as_deref(),
                    method: method.as_deref(),
                    name: name.as_deref(),
                };
                self.mcp(&room, headers, &body, claims.as_ref()).await
            }
            Asked::Call(Call::Watching) => {
                let on = body::read(req).await? == b"true";
                self.store.set_watching(on)?;
                Ok(Response::empty()?)
            }
            Asked::Public(Action::Exec | Action::KeptArchive | Action::Live | Action::Audit)
            | Asked::Call(
                Call::AgentExec
                | Call::McpExec
                | Call::Publish
                | Call::Audit
                | Call::HistoryExpired
                | Call::Generation
                | Call::Destroy,
            ) => Err(ApiError::NotFound),
        }
    }

    async fn send(&self, room: &str, request: MessageRequest) -> Result<Response, ApiError> {
        Ok(respond::json_text(200, self.answer(room, request).await?)?)
    }

    /// A message's exchange, answered as `POST …/message` answers it: the
    /// reply, the room's recent messages and the approvals it waits for.
    async fn answer(&self, room: &str, request: MessageRequest) -> Result<String, ApiError> {
        let (agent, approvals) = self.converse(room, request).await?;
        let messages = self.store.recent()?;
        written(&MessageResponse {
            reply: &agent.text,
            messages: &messages,
            approvals: &approvals,
        })
    }

    /// A message to the room's agent, its exchange run, stored and shown on
    /// the live feed; answers the agent's message and the approvals it
    /// waits for.
    async fn converse(
        &self,
        room: &str,
        request: MessageRequest,
    ) -> Result<(Message, Vec<Approval>), ApiError> {
        let started = clock::now_ms();
        let user = Message {
            role: Role::User,
            user_id: request.user_id,
            text: request.text,
            ts: started as i64,
        };
        // Watchers see the message at once, the answer as it comes and the
        // reply when it is stored. Where nobody watches, the room's log is
        // given the message with the reply (after the exchange's commands),
        // in one call to the Sandbox object rather than two.
        let watched = self.store.watching()?;
        let asked = || Event::Message { message: &user };
        if watched {
            self.publish(room, &[asked()]).await;
        }
        let unseen = (!watched).then(asked);
        let (agent, approvals) = match self.exchange(room, &user, watched).await {
            Ok(done) => done,
            Err(e) => {
                let error = e.to_string();
                let failed = Event::Failed { error: &error };
                self.publish(
                    room,
                    &unseen.into_iter().chain([failed]).collect::<Vec<_>>(),
                )
                .await;
                return Err(e);
            }
        };
        let mut events: Vec<Event> = unseen.into_iter().collect();
        events.push(Event::Message { message: &agent });
        events.extend(
            approvals
                .iter()
                .map(|approval| Event::Approval { approval }),
        );
        self.publish(room, &events).await;
        Ok((agent, approvals))
    }

    /// Runs the exchange for `user` and stores it; answers the agent's
    /// message, and the approvals it waits for.
    async fn exchange(
        &self,
        room: &str,
        user: &Message,
        watched: bool,
    ) -> Result<(Message, Vec<Approval>), ApiError> {
        let epoch = self.clock.epoch();
        let history = self.store.recent()?;
        let policy = self.policy()?;
        let still_current = || self.clock.still_current(epoch);
        let done = exchange::run(
            &self.env,
            room,
            &history,
            user,
            &policy,
            watched,
            still_current,
        )
        .await?;
        if done.reply().is_empty() {
            // Some models refuse an empty assistant turn in the history.
            return Err(ApiError::AiFailed(
                "the model's answer had no text (only empty <run> tags)".into(),
            ));
        }
        self.clock.still_current(epoch)?;
        let (agent, approvals) = self.conclude(done).await?;
        self.store.append(&[user.clone(), agent.clone()])?;
        Ok((agent, approvals))
    }

    /// Sends events, in order, to the room's live feed and its log, if it
    /// can be reached.
    async fn publish(&self, room: &str, events: &[Event<'_>]) {
        if let Ok(sandbox) = SandboxObject::of(&self.env, room) {
            sandbox.publish(events).await;
        }
    }

    /// Records a use of the room and sets its expiry alarm from it (see
    /// `room::clock` for how seldom a busy room pays for either).
    async fn touch(&self, room: &str) -> Result<(), ApiError> {
        let now = clock::now_ms();
        if self.clock.use_due(now, self.timing.ttl_ms) {
            self.store.touch(room, now)?;
        }
        let at = || self.next_alarm(now + self.timing.ttl_ms, now);
        Ok(self.clock.alarm_once(&self.state.storage(), at).await?)
    }

    /// The room's policy; a new room's mode is `DUET_AGENT_COMMANDS`.
    fn policy(&self) -> Result<crate::approvals::policy::Policy, ApiError> {
        let mode = match config::get(&self.env, "DUET_AGENT_COMMANDS") {
            None => AgentCommands::Auto,
            Some(name) => AgentCommands::parse(name.trim()).ok_or_else(|| {
                ApiError::NotConfigured(format!(
                    "DUET_AGENT_COMMANDS is {name:?}; set it to auto, ask or off"
                ))
            })?,
        };
        Ok(self.approvals.policy(mode)?)
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
