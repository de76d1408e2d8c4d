//! When an exec must be answered, as plain arithmetic. A cold sandbox (to
//! be started, or woken) answers within the command's own bound plus
//! [`COLD_START_ALLOWANCE_MS`], and never later than [`EXEC_ANSWER_MS`]
//! after the request arrived: the command's time limit is cut to what is
//! left once the sandbox is ready.

use duet_wire::{restore_ms, RESTORE_MAX_MS};

use crate::api::limits::{COLD_START_ALLOWANCE_MS, EXEC_ANSWER_MS, SANDBOXD_MARGIN_MS};
use crate::sandbox::sandboxd::RESTORE_ANSWER_MS;

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

/// How long a wake's restore may take, from what the archive holds as
/// sandboxd packed it: the time sandboxd gives it, plus the time for its
/// answer. An archive saved without those figures gets the longest.
pub fn restore_limit(entries: Option<u64>, unpacked: Option<u64>) -> u64 {
    let sandboxd_ms = match (entries, unpacked) {
        (Some(entries), Some(bytes)) => restore_ms(entries, bytes).min(RESTORE_MAX_MS),
        _ => RESTORE_MAX_MS,
    };
    sandboxd_ms + RESTORE_ANSWER_MS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::limits::EXEC_MAX_TIMEOUT_MS;

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
    fn a_restore_gets_the_time_its_archive_needs() {
        let small = restore_limit(Some(10), Some(10_000));
        let tree = restore_limit(Some(14_400), Some(14_400 * 512));
        assert!(small < tree, "{small} < {tree}");
        assert_eq!(tree, restore_ms(14_400, 14_400 * 512) + RESTORE_ANSWER_MS);
        // What sleep would refuse, or an archive saved without the figures.
        assert_eq!(
            restore_limit(None, Some(1)),
            RESTORE_MAX_MS + RESTORE_ANSWER_MS
        );
        assert_eq!(
            restore_limit(Some(u64::MAX / 2), Some(u64::MAX / 2)),
            RESTORE_MAX_MS + RESTORE_ANSWER_MS
        );
    }

    #[test]
    fn a_short_cold_exec_gets_the_allowance_on_top() {
        assert_eq!(
            exec_deadline(100, 1_000, true),
            100 + 1_000 + SANDBOXD_MARGIN_MS + COLD_START_ALLOWANCE_MS
        );
    }
}
