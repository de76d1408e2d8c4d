//! What the room said of one command: run it, and who or what let it
//! through, or refuse it, and why. The room's policy says it at once
//! ([`Said::of_verdict`]), or a writer does when asked
//! ([`Said::of_approval`]); either way the command's [`Consent`] goes to
//! the audit.

use super::audit::Consent;
use super::policy::Verdict;
use crate::api::shapes::{Approval, Decision};

/// What the room said of one command of the agent's.
pub enum Said {
    Run(Consent),
    Refused { why: String, consent: Consent },
}

impl Said {
    pub fn of_verdict(verdict: &Verdict) -> Self {
        let refused = |why: String, rule: Option<&String>| Said::Refused {
            why,
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
            Verdict::Denied { rule } => {
                refused(format!("the room's rule `{rule}` denies it"), Some(rule))
            }
            Verdict::Off => refused("this room lets the agent run no commands".into(), None),
            Verdict::Ask => unreachable!("asked commands wait"),
        }
    }

    pub fn of_approval(approval: &Approval) -> Self {
        let consent = Consent {
            decided_by: approval.decided_by.clone(),
            rule: approval.rule.clone(),
        };
        let why = match (approval.decision, &approval.rule, &approval.decided_by) {
            (Some(Decision::Approved), ..) => return Said::Run(consent),
            (Some(Decision::Expired) | None, ..) => "nobody approved it in time".into(),
            (_, Some(rule), _) => format!("the room's rule `{rule}` denies it"),
            (_, None, Some(by)) => format!("denied by {by}"),
            (_, None, None) => "denied by a writer".into(),
        };
        Said::Refused { why, consent }
    }
}
