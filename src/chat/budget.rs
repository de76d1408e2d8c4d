//! How the reply's time budget is shared out: a `<run>` command gets what is
//! left of it, less the margin its call to sandboxd may take, and never more
//! than a command's default time limit.

use crate::api::limits::{EXEC_DEFAULT_TIMEOUT_MS, SANDBOXD_MARGIN_MS};

/// The bounds of one command.
#[derive(Debug, PartialEq, Eq)]
pub struct CommandBudget {
    /// The command's own time limit, sent to sandboxd.
    pub timeout_ms: u64,
    /// How long to wait for the sandbox's answer, container start included.
    pub wait_ms: u64,
}

/// The bounds of a command when `left_ms` of the reply's budget remain, or
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

#[cfg(test)]
mod tests {
    use super::*;

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
