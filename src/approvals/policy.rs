//! What a room lets its agent run, as plain data: the mode (`auto` runs the
//! agent's commands at once, `ask` has a writer approve each, `off` runs
//! none) and the room's allow and deny rules, judged here for each command.
//!
//! A rule is a command prefix on whole words: `git status` matches
//! `git status` and `git 'status' -s`, not `git statusx`. The line is read
//! as bash reads it (`shell`), and rules are matched against the words of
//! the commands found there, after quote removal.
//!
//! Deny wins in every mode. It sees every command the line would run, in
//! lists, pipelines, compound commands, function bodies and substitutions,
//! each with its name's path dropped (`/bin/rm` is `rm`), its leading
//! assignments skipped, and the command behind a wrapper tried as well
//! (`command`, `builtin`, `env`, `eval`, `exec`, `nohup`, `time`, `nice`,
//! `timeout`, `sudo`, `doas`, `setsid`, `stdbuf`, `ionice`, `xargs`, whose
//! options and their values are skipped: a word that could be either is
//! tried as a command too). A line the reader gives up on is also judged
//! word by word, a rule tried at every word: that can only deny more.
//!
//! In `ask`, a line runs unasked only when it is plain simple commands
//! (see [`shell::Line::plain`]) and every one begins with an allow rule.
//!
//! What rules cannot see: a script written to a file and run, strings run
//! by another program (`bash -c '…'`, `eval 'rm x'`, `env -S`,
//! `find -exec`), a command name built by a variable, `$(…)`, a glob or a
//! brace expansion inside a word, and what earlier commands left in the
//! room's persistent shell: an alias or function named like an allowed
//! command, a trap, a `PS4` run by `set -x`. So an allow rule for a
//! command that runs its arguments (`eval`, `bash`, `find`, `xargs`, even
//! `printf -v` or `test -v`, which evaluate array subscripts) allows what
//! they run. Deny rules keep honest mistakes out of a shared sandbox; they
//! are no wall against a determined model, which is what `ask` is for.

use std::mem::take;

use serde::Serialize;
use serde_json::Value;

use super::shell;
use crate::api::error::FieldErrors;
use crate::api::limits::{MAX_POLICY_RULES, MAX_RULE_CHARS};
use crate::api::validate::json_object;
use crate::api::ApiError;
use crate::files::tools::normalized;
use crate::files::WRITE_FILE;

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
        let line = shell::parse(cmd);
        let mut cmds = line.cmds;
        let found = cmds.len();
        if !line.ok {
            cmds.push(loose(cmd));
        }
        for (i, words) in cmds.iter().enumerate() {
            if let Some(rule) = denied(&self.deny, words, i == found) {
                return Verdict::Denied { rule: rule.clone() };
            }
        }
        match self.agent_commands {
            AgentCommands::Off => Verdict::Off,
            AgentCommands::Auto => Verdict::Run { rule: None },
            AgentCommands::Ask => {
                let mut first = None;
                for words in cmds.iter().take(found) {
                    match self.allow.iter().find(|r| starts(r, words, false)) {
                        Some(rule) if line.plain => _ = first.get_or_insert(rule),
                        _ => return Verdict::Ask,
                    }
                }
                match first {
                    Some(rule) => Verdict::Run {
                        rule: Some(rule.clone()),
                    },
                    None => Verdict::Ask,
                }
            }
        }
    }
}

impl Policy {
    /// What becomes of the agent's change of the file at `path` (as
    /// `files::tools::normalized` has it) by `tool`, `write_file` or
    /// `edit_file`: the same as for a command, by the rules that name files
    /// ([`names_file`]); the command rules name none.
    pub fn judge_file(&self, tool: &str, path: &str) -> Verdict {
        let names = |rule: &&String| names_file(rule, tool, path);
        if let Some(rule) = self.deny.iter().find(names) {
            return Verdict::Denied { rule: rule.clone() };
        }
        match self.agent_commands {
            AgentCommands::Off => Verdict::Off,
            AgentCommands::Auto => Verdict::Run { rule: None },
            AgentCommands::Ask => match self.allow.iter().find(names) {
                Some(rule) => Verdict::Run {
                    rule: Some(rule.clone()),
                },
                None => Verdict::Ask,
            },
        }
    }
}

/// Whether `rule` names a change by `tool` of `path`. A file rule is a
/// tool and, if any, a path: `write_file` names every change (an edit
/// writes the file too), `edit_file` only edits; with a path, that file
/// and everything beneath it. The path is the one the call names, read
/// as sandboxd reads it, not where a symlink in it leads.
fn names_file(rule: &str, tool: &str, path: &str) -> bool {
    let mut words = rule.split_whitespace();
    let named = match words.next() {
        Some(WRITE_FILE) => true,
        first => first == Some(tool),
    };
    let within = match words.next().map(normalized) {
        None => true,
        Some(scope) => scope.is_empty() || path == scope || path.starts_with(&format!("{scope}/")),
    };
    named && within && words.next().is_none()
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

/// Commands that run the command in their arguments.
const WRAPPERS: &[u8] =
    b"builtin command env eval exec nohup time nice timeout sudo doas setsid stdbuf ionice xargs";

/// The first deny rule that a command the words may run begins with.
/// That command may begin (with `all`, anywhere) past leading assignments,
/// past a word an expansion may have left empty, and past each wrapper and
/// its options; a word after an option may be the option's value or the
/// command, so both are tried.
fn denied<'r>(rules: &'r [String], words: &[Vec<u8>], all: bool) -> Option<&'r String> {
    let mut head = vec![all as u8; words.len() + 1];
    for (k, word) in words.iter().enumerate() {
        if k > 0 && head[k] == 0 {
            continue;
        }
        if let Some(rule) = rules.iter().find(|r| starts(r, &words[k..], true)) {
            return Some(rule);
        }
        if word.is_empty() || shell::assignment(word) {
            head[k + 1] = 1;
        }
        if shell::table(WRAPPERS).any(|w| w == base(word)) {
            let mut opt = false;
            for (j, w) in words.iter().enumerate().skip(k + 1) {
                // Options, numbers (`timeout 5`, `nice -n 10`), `NAME=value`.
                let c = w.first().copied().unwrap_or(0);
                if c == b'-' || c.is_ascii_digit() || shell::assignment(w) {
                    opt = c == b'-';
                    continue;
                }
                head[j] = 1;
                if !opt {
                    break;
                }
                opt = false;
            }
        }
    }
    None
}

/// The words of a line the reader gave up on: cut at blanks and at every
/// character bash treats specially, quotes and backslashes dropped.
fn loose(cmd: &str) -> Vec<Vec<u8>> {
    let mut words = vec![];
    let mut w = vec![];
    for &c in cmd.as_bytes() {
        if c.is_ascii_whitespace() || b";&|()<>`${},".contains(&c) {
            if !w.is_empty() {
                words.push(take(&mut w));
            }
        } else if !b"'\"\\".contains(&c) {
            w.push(c);
        }
    }
    words.push(w);
    words
}

/// A command's name without its path.
fn base(word: &[u8]) -> &[u8] {
    &word[word.iter().rposition(|&c| c == b'/').map_or(0, |k| k + 1)..]
}

/// Whether `rule`'s words begin `words`; for a deny rule the first words
/// are compared without their paths.
fn starts(rule: &str, words: &[Vec<u8>], deny: bool) -> bool {
    let mut words = words.iter();
    rule.split_whitespace()
        .map(str::as_bytes)
        .enumerate()
        .all(|(k, r)| {
            words
                .next()
                .is_some_and(|w| w == r || deny && k == 0 && base(w) == base(r))
        })
}

/// A `PUT /policy` body, `{"agentCommands"?, "allow"?, "deny"?}`, applied
/// to `current`: what it leaves out stays as it was.
pub fn policy_update(body: &[u8], current: &Policy) -> Result<Policy, ApiError> {
    let object = json_object(body)?;
    let mut errors = FieldErrors::new();
    let mut policy = current.clone();
    match object.get("agentCommands") {
        None => {}
        Some(Value::String(mode)) if AgentCommands::parse(mode).is_some() => {
            policy.agent_commands = AgentCommands::parse(mode).expect("just parsed");
        }
        Some(_) => {
            let why = "must be one of auto, ask, off";
            errors.entry("agentCommands").or_default().push(why.into());
        }
    }
    for (field, rules) in [("allow", &mut policy.allow), ("deny", &mut policy.deny)] {
        if let Some(value) = object.get(field) {
            match policy_rules(value) {
                Ok(given) => *rules = given,
                Err(why) => errors.entry(field).or_default().push(why),
            }
        }
    }
    match errors.is_empty() {
        true => Ok(policy),
        false => Err(ApiError::Invalid(errors)),
    }
}

/// A list of rules: at most [`MAX_POLICY_RULES`] strings, each of 1 to
/// [`MAX_RULE_CHARS`] characters once trimmed, without control characters.
fn policy_rules(value: &Value) -> Result<Vec<String>, String> {
    let shape = format!(
        "must be an array of at most {MAX_POLICY_RULES} strings of 1 to {MAX_RULE_CHARS} \
         characters without control characters"
    );
    let Value::Array(items) = value else {
        return Err(shape);
    };
    if items.len() > MAX_POLICY_RULES {
        return Err(shape);
    }
    items
        .iter()
        .map(|item| match item.as_str().map(str::trim) {
            Some(rule)
                if !rule.is_empty()
                    && rule.chars().count() <= MAX_RULE_CHARS
                    && !rule.contains(char::is_control) =>
            {
                Ok(rule.to_owned())
            }
            _ => Err(shape.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::validate::tests::details;

    fn words(cmd: &str) -> Vec<Vec<String>> {
        let text = |w: &Vec<u8>| String::from_utf8_lossy(w).into_owned();
        let cmds = shell::parse(cmd).cmds;
        cmds.iter().map(|c| c.iter().map(text).collect()).collect()
    }

    fn policy(mode: AgentCommands, allow: &[&str], deny: &[&str]) -> Policy {
        let own = |rules: &[&str]| rules.iter().map(|r| r.to_string()).collect();
        Policy {
            agent_commands: mode,
            allow: own(allow),
            deny: own(deny),
        }
    }

    #[test]
    fn file_rules_name_a_tool_and_a_path_with_all_beneath_it() {
        let p = policy(
            AgentCommands::Ask,
            &["write_file docs/", "edit_file src/lib.rs"],
            &["write_file .env", "edit_file secrets"],
        );
        let judged = |tool, path| p.judge_file(tool, path);
        let denied = |rule: &str| Verdict::Denied { rule: rule.into() };
        let ran = |rule: &str| Verdict::Run {
            rule: Some(rule.into()),
        };
        assert_eq!(judged("write_file", ".env"), denied("write_file .env"));
        assert_eq!(
            judged("edit_file", ".env"),
            denied("write_file .env"),
            "an edit writes"
        );
        assert_eq!(
            judged("edit_file", "secrets/key"),
            denied("edit_file secrets")
        );
        assert_eq!(
            judged("write_file", "secrets/key"),
            Verdict::Ask,
            "an edit rule names edits only"
        );
        assert_eq!(
            judged("write_file", ".envrc"),
            Verdict::Ask,
            "a path, not a prefix of text"
        );
        assert_eq!(judged("write_file", "docs/a/b.md"), ran("write_file docs/"));
        assert_eq!(
            judged("edit_file", "src/lib.rs"),
            ran("edit_file src/lib.rs")
        );
        assert_eq!(judged("write_file", "src/lib.rs"), Verdict::Ask);
        // Command rules name no file, and file rules no command.
        let shell = policy(AgentCommands::Auto, &[], &["rm", "write_file"]);
        assert_eq!(shell.judge_file("edit_file", "a"), denied("write_file"));
        assert_eq!(shell.judge("write_file a"), denied("write_file"));
        assert_eq!(
            policy(AgentCommands::Auto, &[], &["rm"]).judge_file("write_file", "rm"),
            Verdict::Run { rule: None }
        );
        assert_eq!(
            policy(AgentCommands::Off, &[], &[]).judge_file("write_file", "a"),
            Verdict::Off
        );
    }

    #[test]
    fn rules_match_whole_words_from_the_start() {
        let starts = |rule, cmd| starts(rule, &shell::parse(cmd).cmds[0], false);
        assert!(starts("git status", "git status"));
        assert!(starts("git status", "git   status -s"));
        assert!(starts("git status", "git 'status' -s"));
        assert!(!starts("git status", "git statusx"));
        assert!(!starts("git status", "git"));
        assert!(!starts("rm", "echo rm"));
        assert!(!starts("ls", "/bin/ls"));
    }

    #[test]
    fn every_part_of_a_command_line_is_judged() {
        assert_eq!(
            words("cd src && FOO=1 BAR=x make -j2 | tee log; ls\n  X=1"),
            [
                vec!["cd", "src"],
                vec!["make", "-j2"],
                vec!["tee", "log"],
                vec!["ls"]
            ]
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
        // A quoted operator is a word's, as in bash (it used to split the
        // command and ask).
        assert_eq!(
            p.judge("cat 'a;b'"),
            Verdict::Run {
                rule: Some("cat".into())
            }
        );
        assert_eq!(
            policy(AgentCommands::Auto, &[], &[]).judge("make"),
            Verdict::Run { rule: None }
        );
    }

    #[test]
    fn allow_rules_let_through_only_plain_simple_commands() {
        let p = policy(
            AgentCommands::Ask,
            &["ls", "echo", "git status", "cat"],
            &[],
        );
        for cmd in [
            "ls $(touch pwn1)",
            "echo `touch pwn2`",
            "ls >(touch pwn3)",
            "cat <(touch pwn4)",
            "echo hi > pwn5",
            "git status $(touch pwn6)",
            "echo hi >> f",
            "ls &> f",
            "ls 2>f",
            "ls >&f",
            "ls >|f",
            "ls <>f",
            "cat < /etc/shadow",
            "ls > $f",
            "ls >/dev/null/../f",
            "ls {fd}>/dev/null",
            "echo $((x))",
            "echo $[x]",
            "echo ${x@P}",
            "echo ${!x}",
            "echo ${x[0]}",
            "echo ${#x}",
            "echo ${x:=y}",
            "echo \"${x:-$(touch y)}\"",
            "PATH=. ls",
            "LD_PRELOAD=/tmp/x.so ls",
            "ls; (touch x)",
            "(ls)",
            "{ ls; }",
            "{ls,-la}",
            "$x",
            "$x ls",
            "l? -la",
            "~/ls",
            "/bin/ls",
            "\"$(echo ls)\"",
            "cat <<EOF\nx\nEOF",
            "cat <<'EOF'\nx\nEOF",
            "cat <<< x",
            "ls\ntouch x",
            "ls & touch x",
            "ls \"$(touch x)\"",
            "ls \\$(touch x)",
            "echo \"`echo \\`touch x\\``\"",
            "if true; then ls; fi",
            "while ls; do :; done",
            "for f in a; do ls; done",
            "case a in a) ls;; esac",
            "! ls",
            "time ls",
            "[[ -f x ]] && ls",
            "((x)) && ls",
            "ls() { touch x; }",
            "function ls { touch x; }",
            "coproc ls",
            "ls 'a",
            "ls @(a|b)",
            "",
            "# only a comment",
        ] {
            assert_eq!(p.judge(cmd), Verdict::Ask, "{cmd:?}");
        }
        for (cmd, rule) in [
            ("ls -la", "ls"),
            ("git status", "git status"),
            ("git 'status' -s", "git status"),
            ("cat README.md", "cat"),
            ("git status && ls -la | cat", "git status"),
            ("echo \"hello world\"", "echo"),
            ("ls 2>&1", "ls"),
            (
                "ls > /dev/null 2>/dev/null </dev/null &>/dev/null >&2 3>&-",
                "ls",
            ),
            ("ls {a,b} *.rs ~/x", "ls"),
            ("ls # comment; touch x", "ls"),
            ("ls '$(touch x)'", "ls"),
            ("ls \\$\\(touch x\\)", "ls"),
            ("echo $HOME \"$1\" ${PWD} ${1} ${@} $? \"$@\" $#", "echo"),
            ("'ls' -l; cat a |& cat &", "ls"),
            ("ls\n\necho done;", "ls"),
        ] {
            let want = Verdict::Run {
                rule: Some(rule.into()),
            };
            assert_eq!(p.judge(cmd), want, "{cmd:?}");
        }
    }

    #[test]
    fn deny_rules_see_every_command_the_line_runs() {
        let p = policy(AgentCommands::Auto, &[], &["git push", "rm"]);
        for cmd in [
            "/bin/rm x",
            "./rm x",
            "\\rm x",
            "'rm' x",
            "r''m x",
            "\"rm\" x",
            "r\\\nm x",
            "$'\\x72m' x",
            "command rm x",
            "command -p rm x",
            "command -v rm",
            "env rm x",
            "/usr/bin/env -i -u HOME FOO=1 -- rm x",
            "nohup rm x",
            "time rm x",
            "time -p rm x",
            "builtin command rm x",
            "env nohup time rm x",
            "exec -a name rm x",
            "eval command rm x",
            "sudo -u bob rm x",
            "nice -n 10 rm x",
            "timeout -s KILL 5 rm x",
            "xargs -I {} rm {}",
            "FOO=1 rm x",
            "! rm x",
            "(rm x)",
            "{ rm x; }",
            "if true; then rm -rf x; fi",
            "if rm x; then :; fi",
            "while rm x; do :; done",
            "for f in *; do rm $f; done",
            "select f in a; do rm $f; done",
            "case x in x) rm x;; esac",
            "f() { rm x; }",
            "ls && rm x",
            "ls || rm x",
            "ls | rm x",
            "ls |& rm x",
            "ls & rm x",
            "ls\nrm x",
            "echo $(rm x)",
            "echo \"$(rm x)\"",
            "echo `rm x`",
            "echo \"`echo \\`rm x\\``\"",
            "cat <(rm x)",
            "a=$(rm x) ls",
            "ls > \"$(rm x)\"",
            "echo ${x:-$(rm x)}",
            "echo $((1 + $(rm x)))",
            "[[ -n $(rm x) ]]",
            "(( $(rm x) ))",
            "cat <<E\n$(rm x)\nE",
            "{rm,-rf,x}",
            "$x {rm,-rf,x}",
            "env {rm,-rf,x}",
            "rm 'unbalanced",
            "echo $(rm x",
            "coproc rm x",
            "$x rm x",
            "${x} \\rm x",
            "\"$x\" env \"\" rm x",
            "$'rm'$x x",
            "r${x}m x",
            "git push",
            "command git push --force",
        ] {
            assert!(matches!(p.judge(cmd), Verdict::Denied { .. }), "{cmd:?}");
        }
        for cmd in [
            "echo rm",
            "git commit -m 'rm x'",
            "echo '$(rm x)'",
            "cat <<'E'\n$(rm x)\nE",
            "nohup grep rm x",
            "sudo -u bob grep rm x",
            "git status",
            "rmdir x",
        ] {
            assert_eq!(p.judge(cmd), Verdict::Run { rule: None }, "{cmd:?}");
        }
        let by_path = policy(AgentCommands::Auto, &[], &["/bin/rm"]);
        assert!(matches!(by_path.judge("rm x"), Verdict::Denied { .. }));
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

    #[test]
    fn policy_updates_change_only_what_they_name() {
        let current = Policy::new(AgentCommands::Auto);
        let p = policy_update(
            br#"{"agentCommands": "ask", "deny": [" rm -rf "]}"#,
            &current,
        )
        .unwrap();
        assert_eq!(p.agent_commands, AgentCommands::Ask);
        assert_eq!(
            (p.allow.len(), p.deny.as_slice()),
            (0, &["rm -rf".to_string()][..])
        );
        let same = policy_update(b"{}", &p).unwrap();
        assert_eq!(same, p);
        let cleared = policy_update(br#"{"deny": []}"#, &p).unwrap();
        assert!(cleared.deny.is_empty() && cleared.agent_commands == AgentCommands::Ask);
    }

    #[test]
    fn bad_policies_name_every_field() {
        let current = Policy::new(AgentCommands::Auto);
        let long = format!(r#"{{"allow": ["{}"]}}"#, "x".repeat(MAX_RULE_CHARS + 1));
        let many = format!(
            r#"{{"deny": [{}]}}"#,
            vec![r#""ls""#; MAX_POLICY_RULES + 1].join(",")
        );
        for body in [
            r#"{"agentCommands": "sometimes"}"#,
            r#"{"agentCommands": null}"#,
            r#"{"allow": "ls"}"#,
            r#"{"allow": [""]}"#,
            r#"{"allow": [" "]}"#,
            r#"{"allow": [5]}"#,
            r#"{"deny": ["rm\u0007"]}"#,
            &long,
            &many,
        ] {
            let e = policy_update(body.as_bytes(), &current).unwrap_err();
            assert!(matches!(e, ApiError::Invalid(_)), "{body}");
        }
        let both =
            details(policy_update(br#"{"agentCommands": 1, "deny": {}}"#, &current).unwrap_err());
        assert!(both["agentCommands"].is_array() && both["deny"].is_array());
        assert!(matches!(
            policy_update(b"[]", &current),
            Err(ApiError::NotAnObject)
        ));
    }
}
