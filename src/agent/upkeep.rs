//! What every action of the DuetAgent shares, beneath them all: noting
//! the room's use and setting its one alarm, the room's policy, and
//! publishing to the room's feed. Nothing here calls back into the
//! actions (see the object's docs for how they stand).

use super::DuetAgent;
use crate::api::ApiError;
use crate::approvals::policy::{AgentCommands, Policy};
use crate::feed::event::Event;
use crate::room::calls::SandboxObject;
use crate::runtime::{clock, config};

impl DuetAgent {
    /// Records a use of the room and sets its expiry alarm from it (see
    /// `room::clock` for how seldom a busy room pays for either).
    pub(super) async fn touch(&self, room: &str) -> Result<(), ApiError> {
        let now = clock::now_ms();
        if self.clock.use_due(now, self.timing.ttl_ms) {
            self.store.touch(room, now)?;
        }
        let at = || self.next_alarm(now + self.timing.ttl_ms, now);
        Ok(self.clock.alarm_once(&self.state.storage(), at).await?)
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

    /// The room's policy; a new room's mode is `DUET_AGENT_COMMANDS`.
    pub(super) fn policy(&self) -> Result<Policy, ApiError> {
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

    /// Sends events, in order, to the room's live feed and its log, if it
    /// can be reached.
    pub(super) async fn publish(&self, room: &str, events: &[Event<'_>]) {
        if let Ok(sandbox) = SandboxObject::of(&self.env, room) {
            sandbox.publish(events).await;
        }
    }
}
