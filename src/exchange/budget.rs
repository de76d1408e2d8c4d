//! How the exchange's time budget is shared out: a `<run>` command gets what is
//! left of it, less the margin its call to sandboxd may take, and never more
//! than a command's default time limit; a follow-up model call is made only
//! when what is left holds it and one command after it.

use crate::api::limits::{EXEC_DEFAULT_TIMEOUT_MS, SANDBOXD_MARGIN_MS};

/// The least time worth giving a follow-up model call.
pub const MIN_MODEL_CALL_MS: u64 = 3_000;
/// The least time worth giving a command (beyond [`SANDBOXD_MARGIN_MS`]).
pub const MIN_COMMAND_MS: u64 = 1_000;

/// The bounds of one command.
#[derive(Debug, PartialEq, Eq)]
pub struct CommandBudget {
    /// The command's own time limit, sent to sandboxd.
    pub timeout_ms: u64,
    /// How long to wait for the sandbox's answer, container start included.
    pub wait_ms: u64,
}

/// The bounds of a command when `left_ms` of the exchange's budget remain, or
/// `None` when that leaves the command no time at all.
pub fn command_budget(left_ms: u64) -> Option<CommandBudget> {
    let timeout_ms = left_ms
        .saturating_sub(SANDBOXD_MARGIN_MS)
        .min(EXEC_DEFAULT_TIMEOUT_MS);
    (timeout_ms > 0).then_some(CommandBudget {
        timeout_ms,
        wait_ms: left_ms,
    })
}

/// What a follow-up model call may take when `left_ms` of the budget
/// remain and the model's own limit is `model_limit_ms`: all but room for
/// one command, or `None` when that leaves less than [`MIN_MODEL_CALL_MS`].
pub fn follow_up_call(left_ms: u64, model_limit_ms: u64) -> Option<u64> {
    let for_model = left_ms.checked_sub(MIN_COMMAND_MS + SANDBOXD_MARGIN_MS)?;
    (for_model >= MIN_MODEL_CALL_MS).then_some(for_model.min(model_limit_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follow_up_keeps_room_for_a_command() {
        let command = MIN_COMMAND_MS + SANDBOXD_MARGIN_MS;
        assert_eq!(follow_up_call(20_000, 15_000), Some(15_000));
        assert_eq!(follow_up_call(10_000, 15_000), Some(10_000 - command));
        assert_eq!(
            follow_up_call(MIN_MODEL_CALL_MS + command, 15_000),
            Some(MIN_MODEL_CALL_MS)
        );
        assert_eq!(
            follow_up_call(MIN_MODEL_CALL_MS + command - 1, 15_000),
            None
        );
        assert_eq!(follow_up_call(0, 15_000), None);
        assert_eq!(
            follow_up_call(20_000, 1_500),
            Some(1_500),
            "never past the model's limit"
        );
    }

    #[test]
    fn plenty_of_time_gives_the_default_limit() {
        assert_eq!(
            command_budget(25_000),
            Some(CommandBudget {
                timeout_ms: EXEC_DEFAULT_TIMEOUT_MS,
                wait_ms: 25_000
            })
        );
    }

    #[test]
    fn a_short_budget_leaves_the_margin_for_the_call() {
        assert_eq!(
            command_budget(SANDBOXD_MARGIN_MS + 1),
            Some(CommandBudget {
                timeout_ms: 1,
                wait_ms: SANDBOXD_MARGIN_MS + 1
            })
        );
        assert_eq!(command_budget(5_000).unwrap().timeout_ms, 3_000);
    }

    #[test]
    fn a_spent_budget_runs_nothing() {
        assert_eq!(command_budget(SANDBOXD_MARGIN_MS), None);
        assert_eq!(command_budget(1), None);
        assert_eq!(command_budget(0), None);
    }
}
