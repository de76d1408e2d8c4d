//! DuetAgent, one Durable Object per room (named by the room id): it keeps the
//! room's history, and holds each exchange ([`exchange`]): the model's answers
//! and the `<run>` commands they ask for, in the room's sandbox, within the
//! exchange's time budget. An exchange is stored as one user message and one
//! agent message once it is over.
//!
//! Cleanup is final: each cleanup starts a new epoch, and an exchange that
//! began in an earlier one runs no further command and stores nothing (it
//! answers 409), so nothing from before a `DELETE` reappears after it. An
//! exchange in flight keeps the object in memory, so the epoch need not be
//! stored.

mod exchange;
mod store;

use std::cell::Cell;
use std::time::Duration;

use worker::wasm_bindgen::{self, prelude::wasm_bindgen, JsValue};
use worker::worker_sys::DurableObjectState;
use worker::{web_sys, Env, Method, Response, State};

use crate::api::limits::ROOM_TTL_SECONDS;
use crate::api::live::Event;
use crate::api::route::{self, Action};
use crate::api::wire::{
    CleanupResponse, HistoryResponse, Message, MessageRequest, MessageResponse, Role,
};
use crate::api::{validate, ApiError};
use crate::runtime::internal;
use crate::runtime::log::{self, LifecycleLog};
use crate::runtime::{bindings, body, clock, config, respond};
use crate::sandbox::lifecycle::write_due;
use crate::sandbox::{sandbox_stub, SandboxStub};
use store::Store;

/// The DuetAgent object of a room.
pub fn agent_stub(env: &Env, room: &str) -> worker::Result<worker::Stub> {
    bindings::durable_objects(env, "DUET_AGENT")?.get_by_name(room)
}

/// How long a room lives after its last use.
fn room_ttl_ms(env: &Env) -> u64 {
    config::seconds_as_ms(env, "ROOM_TTL_SECONDS", ROOM_TTL_SECONDS)
}

#[wasm_bindgen]
pub struct DuetAgent {
    state: State,
    store: Store,
    env: Env,
    /// Cleanups so far (see the module docs).
    epoch: Cell<u64>,
    /// When this instance last wrote the room's last use.
    touched: Cell<Option<u64>>,
    /// This instance has set the expiry alarm.
    alarm_set: Cell<bool>,
}

/// The runtime's entry points (by hand: see the crate docs).
#[wasm_bindgen(wasm_bindgen_futures = worker::wasm_bindgen_futures, js_sys = worker::js_sys)]
impl DuetAgent {
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> Self {
        let state = State::from(state);
        let store = Store::open(state.storage().sql()).expect("the messages table can be created");
        Self {
            state,
            store,
            env,
            epoch: Cell::new(0),
            touched: Cell::new(None),
            alarm_set: Cell::new(false),
        }
    }

    pub async fn fetch(&self, req: web_sys::Request) -> web_sys::Response {
        let url = req.url();
        let outcome = self.handle(req, &url).await;
        respond::from_object("DuetAgent", route::path_of(&url), outcome).into()
    }

    pub async fn alarm(&self) -> Result<(), JsValue> {
        Ok(self.expire().await?)
    }
}

impl DuetAgent {
    /// The room expires `ROOM_TTL_SECONDS` after its last use.
    async fn expire(&self) -> worker::Result<()> {
        let Some((room, last_used)) = self.store.last_use()? else {
            return Ok(());
        };
        let expires = last_used.saturating_add(room_ttl_ms(&self.env));
        let now = clock::now_ms();
        if now < expires {
            self.state
                .storage()
                .set_alarm(Duration::from_millis(expires - now))
                .await?;
            self.alarm_set.set(true);
            return Ok(());
        }
        self.alarm_set.set(false);
        self.epoch.set(self.epoch.get() + 1);
        self.store.clear()?;
        self.touched.set(None);
        if self.store.watching()? {
            // What the watchers show is gone: the feed tells them and closes.
            self.to_feed(&room, Action::HistoryExpired, None).await;
        }
        log::emit(&LifecycleLog {
            event: "expire",
            object: "DuetAgent",
            room: &room,
            bytes: None,
            duration_ms: clock::now_ms() - now,
            note: None,
        });
        Ok(())
    }

    async fn handle(&self, req: web_sys::Request, url: &str) -> Result<Response, ApiError> {
        let (room, action) = route::room(&req.method(), route::path_of(url))?;
        if matches!(action, Action::SendMessage | Action::History) {
            self.touch(&room).await?;
        }
        match action {
            Action::SendMessage => {
                let request = validate::message_request(&body::read(req).await?)?;
                self.send(&room, request).await
            }
            Action::History => Ok(respond::json(
                200,
                &HistoryResponse {
                    messages: &self.store.recent()?,
                },
            )?),
            Action::Cleanup => self.cleanup(&room).await,
            Action::Watching => {
                let on = body::read(req).await? == b"true";
                self.store.set_watching(on)?;
                Ok(Response::empty()?)
            }
            Action::Exec
            | Action::KeptArchive
            | Action::Live
            | Action::Publish
            | Action::AgentExec
            | Action::HistoryExpired => Err(ApiError::NotFound),
        }
    }

    async fn send(&self, room: &str, request: MessageRequest) -> Result<Response, ApiError> {
        let started = clock::now_ms();
        let user = Message {
            role: Role::User,
            user_id: request.user_id,
            text: request.text,
            ts: started as i64,
        };
        // Watchers see the message at once, and its reply when it is stored.
        let watched = self.store.watching()?;
        if watched {
            self.publish(room, &Event::Message { message: &user }).await;
        }
        let agent = match self.exchange(room, &user).await {
            Ok(agent) => agent,
            Err(e) => {
                if watched {
                    let error = e.to_string();
                    self.publish(room, &Event::Failed { error: &error }).await;
                }
                return Err(e);
            }
        };
        if watched {
            self.publish(room, &Event::Message { message: &agent })
                .await;
        }
        let messages = self.store.recent()?;
        Ok(respond::json(
            200,
            &MessageResponse {
                reply: &agent.text,
                messages: &messages,
            },
        )?)
    }

    /// Runs the exchange for `user` and stores it; answers the agent's
    /// message.
    async fn exchange(&self, room: &str, user: &Message) -> Result<Message, ApiError> {
        let epoch = self.epoch.get();
        let history = self.store.recent()?;
        let started = user.ts as u64;
        let done = exchange::run(&self.env, room, &history, &user.text, started, || {
            self.still_current(epoch)
        })
        .await?;
        let reply = done.reply();
        if reply.is_empty() {
            // Some models refuse an empty assistant turn in the history.
            return Err(ApiError::AiFailed(
                "the model's answer had no text (only empty <run> tags)".into(),
            ));
        }
        self.still_current(epoch)?;
        let agent = Message {
            role: Role::Agent,
            user_id: None,
            text: reply,
            ts: clock::now_ms() as i64,
        };
        self.store.append(&[user.clone(), agent.clone()])?;
        Ok(agent)
    }

    /// Sends an event to the room's live feed.
    async fn publish(&self, room: &str, event: &Event<'_>) {
        let event = event.to_json();
        self.to_feed(room, Action::Publish, Some(event.as_bytes()))
            .await;
    }

    /// An internal request to the room's live feed. A feed that cannot be
    /// reached costs the caller nothing but the request.
    async fn to_feed(&self, room: &str, action: Action, body: Option<&[u8]>) {
        let Ok(feed) = sandbox_stub(&self.env, room) else {
            return;
        };
        let path = route::internal_path(room, action);
        let _ = internal::send(&feed, Method::Post, &path, body).await;
    }

    /// Records a use of the room and sets its expiry alarm from it.
    /// The room's last use is written at most once per tenth of its time to
    /// live (and at least once a minute), and the alarm set once per object
    /// instance: when it fires early it is set again from the last use. So a
    /// busy room pays for neither on most requests.
    async fn touch(&self, room: &str) -> Result<(), ApiError> {
        let now = clock::now_ms();
        let ttl = room_ttl_ms(&self.env);
        if write_due(self.touched.get(), now, ttl) {
            self.store.touch(room, now)?;
            self.touched.set(Some(now));
        }
        if !self.alarm_set.replace(true) {
            self.state
                .storage()
                .set_alarm(Duration::from_millis(ttl))
                .await?;
        }
        Ok(())
    }

    /// Fails once a cleanup has begun since `epoch`.
    fn still_current(&self, epoch: u64) -> Result<(), ApiError> {
        match self.epoch.get() == epoch {
            true => Ok(()),
            false => Err(ApiError::CleanedUp),
        }
    }

    async fn cleanup(&self, room: &str) -> Result<Response, ApiError> {
        self.epoch.set(self.epoch.get() + 1);
        self.store.clear()?;
        self.touched.set(None);
        self.alarm_set.set(false);
        self.state.storage().delete_alarm().await?;
        let errors: Vec<String> = match SandboxStub::for_room(&self.env, room)?.destroy(room).await
        {
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
