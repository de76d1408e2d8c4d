//! The DuetAgent's side of an exchange (`crate::exchange`): a message's
//! exchange run, an exchange whose approvals are decided carried on, and
//! the tail both share ([`DuetAgent::finish`]): the agent's message stored
//! after what it answers and published with the approvals it waits for.

use super::{written, DuetAgent};
use crate::api::limits::APPROVAL_TIMEOUT_SECONDS;
use crate::api::shapes::{Approval, Message, MessageRequest, MessageResponse, Role};
use crate::api::ApiError;
use crate::approvals::pending::Ready;
use crate::exchange::rounds::Stop;
use crate::exchange::run::{self, Exchange, Paused};
use crate::feed::event::Event;
use crate::runtime::{clock, config};

impl DuetAgent {
    /// A message's exchange, answered as `POST …/message` answers it: the
    /// reply, the room's recent messages and the approvals it waits for.
    pub(super) async fn answer(
        &self,
        room: &str,
        request: MessageRequest,
    ) -> Result<String, ApiError> {
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
        let user = Message {
            role: Role::User,
            user_id: request.user_id,
            text: request.text,
            ts: clock::now_ms() as i64,
        };
        // Watchers see the message at once, the answer as it comes and the
        // reply when it is stored. Where nobody watches, the room's log is
        // given the message with the reply (after the exchange's commands),
        // in one call to the Sandbox object rather than two.
        let watched = self.store.watching()?;
        if watched {
            self.publish(room, &[Event::Message { message: &user }])
                .await;
        }
        let unseen = (!watched).then_some(&user);
        let epoch = self.clock.epoch();
        let finished = match self.run(room, &user, watched, epoch).await {
            Ok(done) => self.finish(room, epoch, done, Some(&user), unseen).await,
            Err(e) => Err(e),
        };
        if let Err(e) = &finished {
            let error = e.to_string();
            let unseen = unseen.map(|message| Event::Message { message });
            let failed = Event::Failed { error: &error };
            let events: Vec<Event> = unseen.into_iter().chain([failed]).collect();
            self.publish(room, &events).await;
        }
        finished
    }

    /// Runs the exchange for `user`.
    async fn run(
        &self,
        room: &str,
        user: &Message,
        watched: bool,
        epoch: u64,
    ) -> Result<Exchange, ApiError> {
        let history = self.store.recent()?;
        let policy = self.policy()?;
        let still_current = || self.clock.still_current(epoch);
        let done = run::run(
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
        Ok(done)
    }

    /// Carries on an exchange whose approvals are decided.
    pub(super) async fn go_on(&self, room: &str, ready: Ready) -> Result<(), ApiError> {
        // An exchange kept by another version of the worker, unreadable
        // here, is dropped rather than retried for ever.
        let Some(paused) = Paused::read(&ready.paused) else {
            return Ok(());
        };
        let epoch = self.clock.epoch();
        let since = paused.since;
        let history: Vec<Message> = self
            .store
            .recent()?
            .into_iter()
            .filter(|message| message.ts < since)
            .collect();
        let policy = self.policy()?;
        let watched = self.store.watching()?;
        let done = run::resume(
            &self.env,
            room,
            &history,
            paused,
            &ready.decided,
            &policy,
            watched,
            || self.clock.still_current(epoch),
        )
        .await?;
        self.finish(room, epoch, done, None, None).await?;
        Ok(())
    }

    /// The tail of every exchange, new or resumed, unless a cleanup came
    /// since `epoch`: the agent's message, stored after `user` (the message
    /// a new exchange answers), and published after `unseen` (that message,
    /// where nobody watched as it came) with the approvals it waits for.
    async fn finish(
        &self,
        room: &str,
        epoch: u64,
        done: Exchange,
        user: Option<&Message>,
        unseen: Option<&Message>,
    ) -> Result<(Message, Vec<Approval>), ApiError> {
        self.clock.still_current(epoch)?;
        let (agent, approvals) = self.conclude(done).await?;
        let stored: Vec<Message> = user.into_iter().cloned().chain([agent.clone()]).collect();
        self.store.append(&stored)?;
        let mut events: Vec<Event> = unseen
            .map(|message| Event::Message { message })
            .into_iter()
            .collect();
        events.push(Event::Message { message: &agent });
        events.extend(
            approvals
                .iter()
                .map(|approval| Event::Approval { approval }),
        );
        self.publish(room, &events).await;
        Ok((agent, approvals))
    }

    /// The agent's message for an exchange that ended or paused; a paused
    /// one's approvals are kept (and answered) first, as the message names
    /// them.
    async fn conclude(&self, mut done: Exchange) -> Result<(Message, Vec<Approval>), ApiError> {
        let now = clock::now_ms();
        let mut approvals = vec![];
        if let Some((paused, commands)) = done.paused.take() {
            let timeout_ms = config::seconds_as_ms(
                &self.env,
                "DUET_APPROVAL_TIMEOUT_SECONDS",
                APPROVAL_TIMEOUT_SECONDS,
            );
            approvals = self.approvals.propose(
                paused.written(),
                paused.asked_by.as_deref(),
                &commands,
                now,
                now + timeout_ms,
            )?;
            let waiting = approvals.iter().map(|a| (a.id, a.command.clone()));
            done.stop = Stop::Waiting(waiting.collect());
            self.schedule(now).await?;
        }
        let agent = Message {
            role: Role::Agent,
            user_id: None,
            text: done.reply(),
            ts: now as i64,
        };
        Ok((agent, approvals))
    }
}
