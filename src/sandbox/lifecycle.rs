//! When a room's sandbox sleeps and when the room is forgotten, as plain
//! arithmetic on the time of its last use.
//!
//! A sandbox with no command for `idle` goes to sleep: its workspace is
//! saved and the sandbox stopped; the next command wakes it. A room with no
//! use for `ttl` expires: everything of it is deleted. One Durable Object
//! alarm serves both, set for whichever comes first.
//!
//! A cold sandbox (to be started, or woken) answers within the command's own
//! bound plus [`COLD_START_ALLOWANCE_MS`], and never later than
//! [`EXEC_ANSWER_MS`] after the request arrived: the command's time limit is
//! cut to what is left once the sandbox is ready.

use crate::api::limits::{COLD_START_ALLOWANCE_MS, EXEC_ANSWER_MS, SANDBOXD_MARGIN_MS};

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

/// Whether a room's last use, last written at `written` (if this object
/// wrote it yet), is due to be written again at `now`, for a clock (idle
/// time or time to live) of `clock_ms`: every tenth of the clock, and at
/// least once a minute. Exact enough for the clock, and a busy room writes
/// seldom.
pub fn write_due(written: Option<u64>, now: u64, clock_ms: u64) -> bool {
    let step = (clock_ms / 10).min(60_000);
    written.is_none_or(|at| now.saturating_sub(at) >= step)
}

/// The moment by which an exec that arrived at `arrived` with a time limit
/// of `timeout_ms` must be answered: the command's bound, plus the start
/// allowance when the sandbox is cold, and never past [`EXEC_ANSWER_MS`].
pub fn exec_deadline(arrived: u64, timeout_ms: u64, cold: bool) -> u64 {
    let allowance = if cold { COLD_START_ALLOWANCE_MS } else { 0 };
    let bound = (timeout_ms + SANDBOXD_MARGIN_MS + allowance).min(EXEC_ANSWER_MS);
    arrived + bound
}

/// The time limit a command can still have at `now`, so that its answer
/// comes by `deadline`; `None` when nothing is left.
pub fn command_limit(timeout_ms: u64, deadline: u64, now: u64) -> Option<u64> {
    let left = deadline
        .saturating_sub(now)
        .saturating_sub(SANDBOXD_MARGIN_MS);
    let limit = timeout_ms.min(left);
    (limit > 0).then_some(limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::limits::EXEC_MAX_TIMEOUT_MS;

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

    #[test]
    fn a_warm_exec_keeps_its_own_bound() {
        assert_eq!(exec_deadline(0, 1_000, false), 1_000 + SANDBOXD_MARGIN_MS);
        assert_eq!(command_limit(1_000, 3_000, 0), Some(1_000));
    }

    #[test]
    fn a_cold_exec_never_answers_past_the_cap() {
        let deadline = exec_deadline(0, EXEC_MAX_TIMEOUT_MS, true);
        assert_eq!(deadline, EXEC_ANSWER_MS);
        // Ready after the whole start allowance: the command gets what is left.
        let limit = command_limit(EXEC_MAX_TIMEOUT_MS, deadline, COLD_START_ALLOWANCE_MS).unwrap();
        assert_eq!(
            limit,
            EXEC_ANSWER_MS - COLD_START_ALLOWANCE_MS - SANDBOXD_MARGIN_MS
        );
        assert!(COLD_START_ALLOWANCE_MS + limit + SANDBOXD_MARGIN_MS <= EXEC_ANSWER_MS);
        assert_eq!(
            command_limit(1_000, deadline, deadline - SANDBOXD_MARGIN_MS),
            None
        );
        assert_eq!(command_limit(1_000, deadline, deadline + 5), None);
    }

    #[test]
    fn a_short_cold_exec_gets_the_allowance_on_top() {
        assert_eq!(
            exec_deadline(100, 1_000, true),
            100 + 1_000 + SANDBOXD_MARGIN_MS + COLD_START_ALLOWANCE_MS
        );
    }
}
