//! A room's clock, which each of its objects holds: when the room sleeps and
//! expires (plain arithmetic on its last use, [`Timing`]), and the state an
//! object instance keeps about it ([`RoomClock`]): the epoch that makes a
//! cleanup final, when it last wrote the room's last use, and whether it has
//! set its alarm.
//!
//! A sandbox with no command for `idle` goes to sleep: its workspace is
//! saved and the sandbox stopped; the next command wakes it. A room with no
//! use for `ttl` expires: everything of it is deleted. One Durable Object
//! alarm per object serves both, set for whichever comes first.
//!
//! A busy room pays for neither its last use nor its alarm on most
//! requests: the last use is written every tenth of the clock it feeds (at
//! least once a minute), and the alarm set once per object instance; when it
//! fires early, it is set again from the last use.

use std::cell::Cell;
use std::time::Duration;

use worker::{Env, Storage};

use crate::api::limits::{ROOM_TTL_SECONDS, SANDBOX_IDLE_SECONDS};
use crate::api::ApiError;
use crate::runtime::{clock, config};

/// The two clocks of a room, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub idle_ms: u64,
    pub ttl_ms: u64,
}

/// What an alarm has to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    Nothing,
    /// Save the workspace and stop the sandbox.
    Sleep,
    /// Forget the room.
    Expire,
}

impl Timing {
    /// The clocks as configured (`SANDBOX_IDLE_SECONDS`, `ROOM_TTL_SECONDS`).
    pub fn of(env: &Env) -> Self {
        Self {
            idle_ms: config::seconds_as_ms(env, "SANDBOX_IDLE_SECONDS", SANDBOX_IDLE_SECONDS),
            ttl_ms: config::seconds_as_ms(env, "ROOM_TTL_SECONDS", ROOM_TTL_SECONDS),
        }
    }

    /// When the alarm should next fire for a room last used at `last_used`.
    pub fn next_alarm(&self, last_used: u64, asleep: bool) -> u64 {
        let expiry = last_used.saturating_add(self.ttl_ms);
        if asleep {
            expiry
        } else {
            expiry.min(last_used.saturating_add(self.idle_ms))
        }
    }

    /// When to ask again, at `now`, after a sandbox was found unfit to sleep
    /// (its workspace could not be restored): after another idle time, not
    /// at once, and never past the room's expiry.
    pub fn after_refused_sleep(&self, now: u64, last_used: u64) -> u64 {
        now.saturating_add(self.idle_ms)
            .min(last_used.saturating_add(self.ttl_ms))
    }

    /// What is due at `now`.
    pub fn due(&self, now: u64, last_used: u64, asleep: bool) -> Due {
        if now >= last_used.saturating_add(self.ttl_ms) {
            Due::Expire
        } else if !asleep && now >= last_used.saturating_add(self.idle_ms) {
            Due::Sleep
        } else {
            Due::Nothing
        }
    }
}

/// Whether something last written at `written` (if this instance wrote it
/// yet) is due to be written again at `now`, for a clock of `clock_ms`:
/// every tenth of the clock, and at least once a minute. Exact enough for
/// the clock, and a busy room writes seldom.
pub fn write_due(written: Option<u64>, now: u64, clock_ms: u64) -> bool {
    let step = (clock_ms / 10).min(60_000);
    written.is_none_or(|at| now.saturating_sub(at) >= step)
}

/// What one object instance knows of the room's clock.
#[derive(Default)]
pub struct RoomClock {
    /// Cleanups and expiries so far: work begun in an earlier epoch stores
    /// nothing and runs nothing more. An exchange or command in flight
    /// keeps the object in memory, so the epoch need not be stored.
    epoch: Cell<u64>,
    /// When this instance last wrote the room's last use.
    written: Cell<Option<u64>>,
    /// This instance has set the alarm.
    alarm_set: Cell<bool>,
}

impl RoomClock {
    pub fn epoch(&self) -> u64 {
        self.epoch.get()
    }

    /// Fails once a cleanup or expiry has begun since `epoch`.
    pub fn still_current(&self, epoch: u64) -> Result<(), ApiError> {
        match self.epoch.get() == epoch {
            true => Ok(()),
            false => Err(ApiError::CleanedUp),
        }
    }

    /// The room is forgotten (cleaned up or expired): what began before
    /// ends, and the next use is written and sets the alarm afresh.
    pub fn forget(&self) {
        self.epoch.set(self.epoch.get() + 1);
        self.written.set(None);
        self.alarm_set.set(false);
    }

    /// Whether a use at `now` is due to be written, for a clock of
    /// `clock_ms` (see [`write_due`]); if so it counts as written.
    pub fn use_due(&self, now: u64, clock_ms: u64) -> bool {
        let due = write_due(self.written.get(), now, clock_ms);
        if due {
            self.written.set(Some(now));
        }
        due
    }

    /// Sets the alarm for `at` (epoch ms) unless this instance already has.
    pub async fn alarm_once(
        &self,
        storage: &Storage,
        at: impl FnOnce() -> worker::Result<u64>,
    ) -> worker::Result<()> {
        match self.alarm_set.get() {
            true => Ok(()),
            false => self.alarm_at(storage, at()?).await,
        }
    }

    /// Sets the alarm for `at` (epoch ms).
    pub async fn alarm_at(&self, storage: &Storage, at: u64) -> worker::Result<()> {
        let delay = at.saturating_sub(clock::now_ms());
        storage.set_alarm(Duration::from_millis(delay)).await?;
        self.alarm_set.set(true);
        Ok(())
    }

    /// The alarm fired and was not set again.
    pub fn alarm_spent(&self) {
        self.alarm_set.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timing = Timing {
        idle_ms: 600_000,
        ttl_ms: 259_200_000,
    };

    #[test]
    fn the_last_use_is_written_every_tenth_and_at_least_once_a_minute() {
        assert!(write_due(None, 0, T.ttl_ms));
        assert!(!write_due(Some(0), 9_999, 100_000));
        assert!(write_due(Some(0), 10_000, 100_000));
        assert!(!write_due(Some(0), 59_999, T.ttl_ms));
        assert!(write_due(Some(0), 60_000, T.ttl_ms));
        assert!(write_due(Some(5), 5, 5));
    }

    #[test]
    fn a_clock_writes_a_use_when_due_and_again_after_it_forgets() {
        let clock = RoomClock::default();
        assert!(clock.use_due(1_000, 100_000));
        assert!(!clock.use_due(5_000, 100_000));
        assert!(clock.use_due(11_000, 100_000));
        let epoch = clock.epoch();
        clock.forget();
        assert!(
            clock.use_due(11_001, 100_000),
            "a forgotten room is written anew"
        );
        assert!(clock.still_current(epoch).is_err());
        assert!(clock.still_current(clock.epoch()).is_ok());
    }

    #[test]
    fn an_awake_room_sleeps_first_then_expires() {
        assert_eq!(T.next_alarm(1_000, false), 601_000);
        assert_eq!(T.next_alarm(1_000, true), 259_201_000);
        assert_eq!(T.due(600_999, 1_000, false), Due::Nothing);
        assert_eq!(T.due(601_000, 1_000, false), Due::Sleep);
        assert_eq!(T.due(601_000, 1_000, true), Due::Nothing);
        assert_eq!(T.due(259_201_000, 1_000, true), Due::Expire);
        assert_eq!(T.due(259_201_000, 1_000, false), Due::Expire, "expiry wins");
    }

    #[test]
    fn a_refused_sleep_is_asked_again_after_another_idle_time() {
        assert_eq!(T.after_refused_sleep(601_000, 1_000), 1_201_000);
        // Not past the expiry, which comes from the last use.
        assert_eq!(T.after_refused_sleep(259_000_000, 1_000), 259_201_000);
    }

    #[test]
    fn an_idle_time_longer_than_the_ttl_never_sleeps() {
        let t = Timing {
            idle_ms: 10_000,
            ttl_ms: 5_000,
        };
        assert_eq!(t.next_alarm(0, false), 5_000);
        assert_eq!(t.due(5_000, 0, false), Due::Expire);
    }
}
