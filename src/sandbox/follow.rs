//! Following a room's running jobs: for each, a task of the Sandbox object
//! reads the job's output stream from sandboxd, from the byte it got to,
//! and puts each piece on the feed (`job_output`) and the newest of it in
//! the job's row, then its end (`job_end`). A follower outlives the request
//! that began it, so it holds handles of its own on what the object keeps.
//! One lost with its object (an eviction, a restart) or its connection is
//! begun again by the alarm, which comes every `jobs::CHECK_MS` while a job
//! runs, from the byte stored. A job sandboxd does not know, or whose
//! container is down, is lost; so is one still running here past its
//! longest life (`jobs::lost_at`), which sandboxd would have stopped.

use std::rc::Rc;

use futures_util::StreamExt;
use serde_json::value::RawValue;
use serde_json::Value;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::spawn_local;
use worker::worker_sys::DurableObjectState;
use worker::{Env, State};

use super::sandboxd::{ContainerState, Sandboxd};
use super::saved::Saved;
use super::stream::Lines;
use crate::api::limits::JOB_OUTPUT_TAIL_BYTES;
use crate::api::shapes::sandbox_name;
use crate::api::ApiError;
use crate::feed::event::Event;
use crate::feed::fanout::Feed;
use crate::jobs::{tail, Bounding, Jobs};
use crate::runtime::clock;

/// What a follower needs of the Sandbox object.
pub struct Follower {
    pub raw: DurableObjectState,
    pub env: Env,
    pub container: Rc<ContainerState>,
    pub saved: Rc<Saved>,
    pub feed: Rc<Feed>,
    pub jobs: Rc<Jobs>,
    pub idle_ms: u64,
}

impl Follower {
    /// Follows job `id` of `room`, unless this instance already does.
    pub fn attach(self, room: &str, id: &str) {
        if !self.jobs.follow(id) {
            return;
        }
        let (room, id) = (room.to_owned(), id.to_owned());
        spawn_local(async move {
            let state = State::from(self.raw.clone().unchecked_into::<DurableObjectState>());
            let followed = self.follow(&state, &room, &id).await;
            self.jobs.unfollow(&id);
            // Anything else leaves it running, for the alarm to follow again.
            if let Err(ApiError::NoSuchJob) = followed {
                let _ = self.end(&state, &room, &id, &Value::Null);
            }
        });
    }

    async fn follow(&self, state: &State, room: &str, id: &str) -> Result<(), ApiError> {
        let Some((mut at, mut kept)) = self.jobs.resume(id)? else {
            return Ok(());
        };
        let sandboxd = Sandboxd::locate(state, &self.env, &self.container, self.idle_ms)?;
        if sandboxd.down() {
            return Err(ApiError::NoSuchJob);
        }
        let mut response = sandboxd.job_output(&sandbox_name(room), id, at).await?;
        let mut chunks = response.stream()?;
        let (mut lines, mut bounding) = (Lines::default(), Bounding::default());
        while let Some(chunk) = chunks.next().await {
            for line in lines.feed(&chunk?) {
                let event: Value = serde_json::from_str(&line).unwrap_or_default();
                if event["type"] == "end" {
                    return self.end(state, room, id, &event);
                }
                let Some(data) = event["data"].as_str() else {
                    continue;
                };
                tail(&mut kept, data, JOB_OUTPUT_TAIL_BYTES);
                at = event["offset"].as_u64().unwrap_or(at) + event["bytes"].as_u64().unwrap_or(0);
                // Ended meanwhile (stopped, or the room deleted): nothing more.
                if !self.jobs.output(id, &kept, at)? {
                    return Ok(());
                }
                self.feed
                    .job_output(state, id, data, bounding.due(data.len()))?;
            }
        }
        Err(ApiError::SandboxFailed(
            "the job's output stream broke off".into(),
        ))
    }

    /// Ends job `id` of `room` as `info` says (sandboxd's `end` event or
    /// `JobInfo`; without a state, it was lost), if it still runs here: the
    /// feed is told, and the room's idle time counts from now.
    pub fn end(&self, state: &State, room: &str, id: &str, info: &Value) -> Result<(), ApiError> {
        let now = clock::now_iso();
        let job = self.jobs.end(
            id,
            info["state"].as_str().unwrap_or("lost"),
            info["exitCode"].as_i64(),
            info["endedAt"].as_str().unwrap_or(&now),
        )?;
        if let Some(job) = job {
            let job = RawValue::from_string(job).map_err(|e| ApiError::Internal(e.to_string()))?;
            self.feed
                .publish(state, &Event::JobEnd { job: &job }.written())?;
            self.saved.touch(room, clock::now_ms(), true)?;
        }
        Ok(())
    }
}
