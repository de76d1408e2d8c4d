//! What the room said of one command: run it, and who or what let it
//! through, or refuse it, and why. The room's policy says it at once
//! ([`Said::of_verdict`]), or a writer does when asked
//! ([`Said::of_approval`]); either way the command's [`Consent`] goes to
//! the audit.
//!
//! This is the one place a refusal is worded, for whoever hears it
//! ([`Hearer`]): the exchange's model, or an MCP client.

use super::audit::Consent;
use super::policy::Verdict;
use crate::api::shapes::{Approval, Decision};

/// What the room said of one command of the agent's or of an MCP client's.
pub enum Said {
    Run(Consent),
    Refused { why: String, consent: Consent },
}

/// Who hears a refusal, which words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hearer {
    /// An exchange's model: it reads why after `not run: ` or under
    /// `Error (<cmd>):`, as the exchange writes its results.
    Exchange,
    /// An MCP client: it reads the refusal whole, as its call's tool error.
    Mcp,
}

/// Why a command was refused.
enum Why<'a> {
    /// An allow or deny rule of the room's.
    Rule(&'a str),
    /// The room's policy is `off`.
    Off,
    /// A writer denied it (named, if known).
    Writer(Option<&'a str>),
    /// Nobody decided by its expiry, `wait_ms` after it was asked.
    Expired { wait_ms: u64 },
}

/// A refusal in the words `hearer` reads. Each hears what it did before
/// the two were worded here in one place: the texts differ where each
/// was written for its own reader (and its tests hold them).
fn worded(why: Why<'_>, hearer: Hearer) -> String {
    let why = match (why, hearer) {
        (Why::Rule(rule), Hearer::Exchange) => format!("the room's rule `{rule}` denies it"),
        (Why::Rule(rule), Hearer::Mcp) => format!("denied by the room's rule `{rule}`"),
        (Why::Off, Hearer::Exchange) => "this room lets the agent run no commands".into(),
        (Why::Off, Hearer::Mcp) => "the room's policy runs no agent commands (off)".into(),
        (Why::Writer(by), _) => format!("denied by {}", by.unwrap_or("a writer")),
        (Why::Expired { .. }, Hearer::Exchange) => "nobody approved it in time".into(),
        (Why::Expired { wait_ms }, Hearer::Mcp) => {
            format!("expired, no writer approved it within {} s", wait_ms / 1000)
        }
    };
    match hearer {
        Hearer::Exchange => why,
        Hearer::Mcp => format!("not run: {why}"),
    }
}

impl Said {
    /// What the policy says of a command it does not ask a writer about.
    pub fn of_verdict(verdict: &Verdict, hearer: Hearer) -> Self {
        let refused = |why: Why<'_>, rule: Option<&String>| Said::Refused {
            why: worded(why, hearer),
            consent: Consent {
                decided_by: None,
                rule: rule.cloned(),
            },
        };
        match verdict {
            Verdict::Run { rule } => Said::Run(Consent {
                decided_by: None,
                rule: rule.clone(),
            }),
            Verdict::Denied { rule } => refused(Why::Rule(rule), Some(rule)),
            Verdict::Off => refused(Why::Off, None),
            Verdict::Ask => unreachable!("asked commands wait"),
        }
    }

    /// What a decided approval says of its command.
    pub fn of_approval(approval: &Approval, hearer: Hearer) -> Self {
        let consent = Consent {
            decided_by: approval.decided_by.clone(),
            rule: approval.rule.clone(),
        };
        let why = match (approval.decision, &approval.rule) {
            (Some(Decision::Approved), _) => return Said::Run(consent),
            (Some(Decision::Expired) | None, _) => Why::Expired {
                wait_ms: approval.expires_at.saturating_sub(approval.asked_at),
            },
            (Some(Decision::Denied), Some(rule)) => Why::Rule(rule),
            (Some(Decision::Denied), None) => Why::Writer(approval.decided_by.as_deref()),
        };
        Said::Refused {
            why: worded(why, hearer),
            consent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(said: Said) -> String {
        match said {
            Said::Refused { why, .. } => why,
            Said::Run(_) => panic!("it runs"),
        }
    }

    fn approval(decision: Decision, decided_by: Option<&str>, rule: Option<&str>) -> Approval {
        Approval {
            diff: None,
            id: 1,
            command: "echo hi".into(),
            asked_by: None,
            asked_at: 1_000,
            expires_at: 31_000,
            decision: Some(decision),
            decided_by: decided_by.map(str::to_owned),
            rule: rule.map(str::to_owned),
            decided_at: Some(2_000),
        }
    }

    #[test]
    fn each_hearer_reads_its_own_words() {
        let denied = Verdict::Denied { rule: "rm".into() };
        let cases = [
            (
                Said::of_verdict(&denied, Hearer::Exchange),
                "the room's rule `rm` denies it",
            ),
            (
                Said::of_verdict(&denied, Hearer::Mcp),
                "not run: denied by the room's rule `rm`",
            ),
            (
                Said::of_verdict(&Verdict::Off, Hearer::Exchange),
                "this room lets the agent run no commands",
            ),
            (
                Said::of_verdict(&Verdict::Off, Hearer::Mcp),
                "not run: the room's policy runs no agent commands (off)",
            ),
        ];
        for (said, words) in cases {
            assert_eq!(refusal(said), words);
        }
        let by_bo = approval(Decision::Denied, Some("bo"), None);
        let by_rule = approval(Decision::Denied, None, Some("curl"));
        let by_nobody = approval(Decision::Denied, None, None);
        let expired = approval(Decision::Expired, None, None);
        let cases = [
            (&by_bo, Hearer::Exchange, "denied by bo"),
            (&by_bo, Hearer::Mcp, "not run: denied by bo"),
            (
                &by_rule,
                Hearer::Exchange,
                "the room's rule `curl` denies it",
            ),
            (&by_nobody, Hearer::Exchange, "denied by a writer"),
            (&by_nobody, Hearer::Mcp, "not run: denied by a writer"),
            (&expired, Hearer::Exchange, "nobody approved it in time"),
            (
                &expired,
                Hearer::Mcp,
                "not run: expired, no writer approved it within 30 s",
            ),
        ];
        for (approval, hearer, words) in cases {
            assert_eq!(refusal(Said::of_approval(approval, hearer)), words);
        }
    }

    #[test]
    fn consent_names_who_or_what_let_it_through() {
        let ruled = Verdict::Run {
            rule: Some("ls".into()),
        };
        let Said::Run(consent) = Said::of_verdict(&ruled, Hearer::Mcp) else {
            panic!("it runs")
        };
        assert_eq!(
            (consent.decided_by, consent.rule),
            (None, Some("ls".into()))
        );
        let approved = approval(Decision::Approved, Some("bo"), None);
        let Said::Run(consent) = Said::of_approval(&approved, Hearer::Exchange) else {
            panic!("it runs")
        };
        assert_eq!(consent.decided_by.as_deref(), Some("bo"));
        let Said::Refused { consent, .. } =
            Said::of_approval(&approval(Decision::Denied, Some("bo"), None), Hearer::Mcp)
        else {
            panic!("it is refused")
        };
        assert_eq!(consent.decided_by.as_deref(), Some("bo"));
    }
}
