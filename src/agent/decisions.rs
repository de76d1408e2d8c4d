//! What the room decides of the agent's commands (see `approvals`): the
//! room's policy, which an owner sets; a writer's decision on a waiting
//! command; and, on the room's alarm, the approvals that expired and the
//! exchanges that may go on. A resumed exchange's answer is stored as a new
//! agent message and published like any other.

use worker::Response;

use super::DuetAgent;
use crate::access::roles;
use crate::access::token::Claims;
use crate::api::limits::APPROVAL_TIMEOUT_SECONDS;
use crate::api::wire::{Approval, Decision, DecisionResponse, Message, Role};
use crate::api::ApiError;
use crate::approvals::pending::Ready;
use crate::approvals::policy::Policy;
use crate::approvals::{pending, policy};
use crate::exchange::rounds::Stop;
use crate::exchange::run::{self as exchange, Exchange, Paused};
use crate::feed::event::Event;
use crate::runtime::log::{self, ObjectFailure};
use crate::runtime::{clock, config, respond};

impl DuetAgent {
    /// `PUT .../policy`: the fields given change, the others stay.
    pub(super) async fn set_policy(&self, room: &str, body: &[u8]) -> Result<Response, ApiError> {
        let policy: Policy = policy::policy_update(body, &self.policy()?)?;
        self.touch(room).await?;
        self.approvals.set_policy(&policy)?;
        self.publish(room, &[Event::Policy { policy: &policy }])
            .await;
        Ok(respond::json(200, &policy)?)
    }

    /// `POST .../approvals/{id}`: the first decision stands. The last one an
    /// exchange waited for lets it go on, on the alarm.
    pub(super) async fn decide(
        &self,
        room: &str,
        id: u64,
        body: &[u8],
        claims: Option<&Claims>,
    ) -> Result<Response, ApiError> {
        let (approve, user_id) = pending::decision_request(body)?;
        let decision = match approve {
            true => Decision::Approved,
            false => Decision::Denied,
        };
        let now = clock::now_ms();
        let by = roles::named(claims, user_id);
        let approval = self.approvals.decide(id, decision, by.as_deref(), now)?;
        self.touch(room).await?;
        self.schedule(now).await?;
        self.publish(
            room,
            &[Event::Decided {
                approval: &approval,
            }],
        )
        .await;
        Ok(respond::json(
            200,
            &DecisionResponse {
                approval: &approval,
            },
        )?)
    }

    /// On the alarm: the approvals that expired are denied, and the
    /// exchanges with nothing left to decide go on, one after another.
    pub(super) async fn decide_due(&self) -> Result<(), ApiError> {
        let Some((room, _)) = self.store.last_use()? else {
            return Ok(());
        };
        let expired = self.approvals.expire(clock::now_ms())?;
        for approval in &expired {
            self.publish(&room, &[Event::Decided { approval }]).await;
        }
        while let Some(ready) = self.approvals.take_ready()? {
            if let Err(e) = self.go_on(&room, ready).await {
                log::emit(&ObjectFailure {
                    object: "DuetAgent",
                    path: "alarm",
                    status: e.status(),
                    error: e.to_string(),
                });
                let error = e.to_string();
                self.publish(&room, &[Event::Failed { error: &error }])
                    .await;
            }
        }
        Ok(())
    }

    /// Carries on an exchange whose approvals are decided.
    async fn go_on(&self, room: &str, ready: Ready) -> Result<(), ApiError> {
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
        let done = exchange::resume(
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
        self.clock.still_current(epoch)?;
        let (agent, approvals) = self.conclude(done).await?;
        self.store.append(std::slice::from_ref(&agent))?;
        let mut events = vec![Event::Message { message: &agent }];
        events.extend(
            approvals
                .iter()
                .map(|approval| Event::Approval { approval }),
        );
        self.publish(room, &events).await;
        Ok(())
    }

    /// The agent's message for an exchange that ended or paused; a paused
    /// one's approvals are kept (and answered) first, as the message names
    /// them.
    pub(super) async fn conclude(
        &self,
        mut done: Exchange,
    ) -> Result<(Message, Vec<Approval>), ApiError> {
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

    /// Sets the alarm for whatever is due first.
    pub(super) async fn schedule(&self, now: u64) -> Result<(), ApiError> {
        let last_used = self.store.last_use()?.map_or(now, |(_, at)| at);
        let at = self.next_alarm(last_used.saturating_add(self.timing.ttl_ms), now)?;
        Ok(self.clock.alarm_at(&self.state.storage(), at).await?)
    }

    /// The room's next alarm: its expiry at `expires`, unless an approval
    /// expires or an exchange may go on before.
    pub(super) fn next_alarm(&self, expires: u64, now: u64) -> worker::Result<u64> {
        Ok(self
            .approvals
            .next_due(now)?
            .map_or(expires, |due| due.min(expires)))
    }
}
