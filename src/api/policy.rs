//! What a room lets its agent run, as plain data: the mode (`auto` runs the
//! agent's commands at once, `ask` has a writer approve each, `off` runs
//! none) and the room's allow and deny rules, judged here for each command.
//!
//! A rule is a command prefix on whole words: `git status` matches
//! `git status` and `git status -s`, not `git statusx`. A command is split
//! at the shell's list and pipe operators (`;`, `&&`, `||`, `|`, `&`,
//! newlines) and every part judged, its leading `NAME=value` words skipped.
//! The split ignores quotes, so a quoted `;` makes one part more: that can
//! only deny more, or ask more. Deny wins in every mode; in `ask` a command
//! runs unasked only when every part is allowed. What rules cannot see:
//! commands hidden in `bash -c '…'`, `eval`, `$(…)`, aliases, or a script
//! written to a file and then run. They keep honest mistakes out of a shared
//! sandbox; they are no wall against a determined model, which is what `ask`
//! is for.

use serde::Serialize;

/// How the room treats the agent's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentCommands {
    Auto,
    Ask,
    Off,
}

impl AgentCommands {
    pub const ALL: [Self; 3] = [Self::Auto, Self::Ask, Self::Off];

    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ask => "ask",
            Self::Off => "off",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.name() == name)
    }
}

/// A room's policy, as `GET /policy` answers it and the room stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub agent_commands: AgentCommands,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl Policy {
    /// A new room's policy: no rules, and the deployment's default mode.
    pub fn new(mode: AgentCommands) -> Self {
        Self {
            agent_commands: mode,
            allow: vec![],
            deny: vec![],
        }
    }

    /// What becomes of the agent's command `cmd`.
    pub fn judge(&self, cmd: &str) -> Verdict {
        let parts = parts(cmd);
        let matching =
            |rules: &[String], part: &str| rules.iter().find(|rule| prefix_of(rule, part)).cloned();
        if let Some(rule) = parts.iter().find_map(|part| matching(&self.deny, part)) {
            return Verdict::Denied { rule };
        }
        match self.agent_commands {
            AgentCommands::Off => Verdict::Off,
            AgentCommands::Auto => Verdict::Run { rule: None },
            AgentCommands::Ask => {
                let allowed: Option<Vec<String>> = parts
                    .iter()
                    .map(|part| matching(&self.allow, part))
                    .collect();
                match allowed.and_then(|rules| rules.into_iter().next()) {
                    Some(rule) => Verdict::Run { rule: Some(rule) },
                    None => Verdict::Ask,
                }
            }
        }
    }
}

/// What a policy makes of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It runs now; `rule` is the allow rule that spared the question.
    Run { rule: Option<String> },
    /// A writer decides.
    Ask,
    /// A deny rule refuses it.
    Denied { rule: String },
    /// The room runs none of the agent's commands.
    Off,
}

/// The simple commands of a command line, each without leading
/// assignments (empty ones left out).
fn parts(cmd: &str) -> Vec<&str> {
    cmd.split([';', '&', '|', '\n'])
        .map(|part| {
            let mut rest = part.trim();
            while let Some((word, after)) = rest.split_once(char::is_whitespace) {
                if !is_assignment(word) {
                    break;
                }
                rest = after.trim_start();
            }
            if is_assignment(rest) {
                ""
            } else {
                rest
            }
        })
        .filter(|part| !part.is_empty())
        .collect()
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Whether `rule`'s words begin `part`'s, whitespace between words counted
/// as one.
fn prefix_of(rule: &str, part: &str) -> bool {
    let mut words = part.split_whitespace();
    rule.split_whitespace()
        .all(|want| words.next() == Some(want))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: AgentCommands, allow: &[&str], deny: &[&str]) -> Policy {
        let own = |rules: &[&str]| rules.iter().map(|r| r.to_string()).collect();
        Policy {
            agent_commands: mode,
            allow: own(allow),
            deny: own(deny),
        }
    }

    #[test]
    fn rules_match_whole_words_from_the_start() {
        assert!(prefix_of("git status", "git status"));
        assert!(prefix_of("git status", "git   status -s"));
        assert!(!prefix_of("git status", "git statusx"));
        assert!(!prefix_of("git status", "git"));
        assert!(!prefix_of("rm", "echo rm"));
    }

    #[test]
    fn every_part_of_a_command_line_is_judged() {
        assert_eq!(
            parts("cd src && FOO=1 BAR=x make -j2 | tee log; ls\n  X=1"),
            ["cd src", "make -j2", "tee log", "ls"]
        );
        let p = policy(AgentCommands::Auto, &[], &["rm -rf", "curl"]);
        assert_eq!(
            p.judge("ls && rm -rf /"),
            Verdict::Denied {
                rule: "rm -rf".into()
            }
        );
        assert_eq!(
            p.judge("echo hi | curl -d @- x.example"),
            Verdict::Denied {
                rule: "curl".into()
            }
        );
        assert_eq!(p.judge("ls; rm -r x"), Verdict::Run { rule: None });
    }

    #[test]
    fn deny_wins_in_every_mode_and_off_runs_nothing() {
        for mode in AgentCommands::ALL {
            let p = policy(mode, &["rm"], &["rm"]);
            assert!(
                matches!(p.judge("rm x"), Verdict::Denied { .. }),
                "{mode:?}"
            );
        }
        let off = policy(AgentCommands::Off, &["ls"], &[]);
        assert_eq!(off.judge("ls"), Verdict::Off);
    }

    #[test]
    fn in_ask_only_a_wholly_allowed_command_runs_unasked() {
        let p = policy(AgentCommands::Ask, &["ls", "cat"], &[]);
        assert_eq!(
            p.judge("ls -la && cat a"),
            Verdict::Run {
                rule: Some("ls".into())
            }
        );
        assert_eq!(p.judge("ls && make"), Verdict::Ask);
        assert_eq!(p.judge("make"), Verdict::Ask);
        // A quoted operator splits too, so it can only ask more.
        assert_eq!(p.judge("cat 'a;b'"), Verdict::Ask);
        assert_eq!(
            policy(AgentCommands::Auto, &[], &[]).judge("make"),
            Verdict::Run { rule: None }
        );
    }

    #[test]
    fn what_rules_cannot_see() {
        // Documented: a deny rule is no wall against a command in disguise.
        let p = policy(AgentCommands::Auto, &[], &["rm"]);
        assert_eq!(p.judge("bash -c 'rm x'"), Verdict::Run { rule: None });
        assert!(matches!(p.judge("sudo=1 rm x"), Verdict::Denied { .. }));
    }

    #[test]
    fn modes_by_name() {
        assert_eq!(AgentCommands::parse("ask"), Some(AgentCommands::Ask));
        assert_eq!(AgentCommands::parse(" ask "), None);
        assert_eq!(AgentCommands::parse("Ask"), None);
        let json = serde_json::to_string(&Policy::new(AgentCommands::Auto)).unwrap();
        assert_eq!(json, r#"{"agentCommands":"auto","allow":[],"deny":[]}"#);
    }
}
