//! What the room decides of the agent's commands (see `approvals`): the
//! room's policy, which an owner sets; a writer's decision on a waiting
//! command; and, on the room's alarm, the approvals that expired and the
//! exchanges that may go on. A resumed exchange's answer is stored as a new
//! agent message and published like any other.

use worker::Response;

use super::DuetAgent;
use crate::access::roles;
use crate::access::token::Claims;
use crate::api::shapes::{Decision, DecisionResponse};
use crate::api::ApiError;
use crate::approvals::policy::Policy;
use crate::approvals::{pending, policy};
use crate::feed::event::Event;
use crate::runtime::log::{self, ObjectFailure};
use crate::runtime::{clock, respond};

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
}
