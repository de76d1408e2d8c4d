//! A `/message` exchange in rounds. The model answers; the commands in its
//! `<run>` tags run; it is asked again, now seeing their results, and may run
//! more, until it answers without tags or a limit is reached: at most
//! [`MAX_MODEL_CALLS`] answers and [`MAX_COMMANDS_PER_MESSAGE`] commands
//! (still at most [`MAX_RUNS_PER_ANSWER`](crate::api::limits::MAX_RUNS_PER_ANSWER)
//! per answer), all within the exchange's time budget (see `budget`).
//!
//! The model sees each of its earlier answers as its own turn, followed by a
//! user turn that carries the results, marked as coming from the sandbox:
//! the plain roles both backends accept. Each result shows the command, its
//! exit code and its output, cut to [`MODEL_OUTPUT_CHARS`] per stream, more
//! than the room's 500-character summaries. The room sees one reply: each
//! answer's text with its `Output`/`Error` blocks, in order, then a note when
//! the exchange stopped before the model was done. Four answers of up to
//! 8,000 characters and eight blocks could come to over 30,000, so the reply
//! is cut to [`MAX_TEXT_CHARS`], the bound of every stored message; its last
//! lines (the note) are kept.

use serde::Serialize;

use crate::ai::messages::ToolCall;
use crate::api::limits::{
    MAX_COMMANDS_PER_MESSAGE, MAX_MODEL_CALLS, MAX_RUNS_PER_ANSWER, MAX_TEXT_CHARS,
    MODEL_OUTPUT_CHARS,
};
use crate::exchange::run_tags::{self, answer_text, quoted, Outcome};
use crate::exchange::tools;
use crate::room::calls::Command;
use crate::text::first_chars;

/// How a results turn begins, so the model can tell it from a person.
pub const RESULTS_HEADER: &str = "[Results of your commands, from the room's sandbox]";

/// One answer of the model and what came of its commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    /// The answer as the model wrote it, tags included: its own turn when
    /// it is asked again.
    pub answer: String,
    /// Its tool calls, when it asked through tools (`exchange::tools`) rather
    /// than tags.
    pub calls: Vec<ToolCall>,
    /// The answer without its tags, as the room sees it.
    pub prose: String,
    /// The commands run, in order, with their outcomes.
    pub ran: Vec<(String, Outcome)>,
    /// Commands of this answer that were left out.
    pub skipped: usize,
}

/// Why the exchange ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The model answered without commands, or ran its last ones.
    Done,
    /// [`MAX_MODEL_CALLS`] answers were given.
    ModelCalls,
    /// [`MAX_COMMANDS_PER_MESSAGE`] commands ran; `not_run` more were asked.
    Commands { not_run: usize },
    /// What is left of the time budget cannot hold another model call and a
    /// command.
    Budget,
    /// A later model call failed; why.
    ModelFailed(String),
    /// The last answer's commands wait for a writer's decision (the room's
    /// policy asks): their approvals' ids and commands. The exchange goes
    /// on once they are decided.
    Waiting(Vec<(u64, String)>),
    /// The room lets the agent run no commands.
    Off,
    /// The model's answer stopped coming before it was done (its stream
    /// broke off, or stalled until the time limit); why. What came is kept,
    /// and its commands, perhaps incomplete, are not run.
    Cut(String),
}

impl Stop {
    /// The line that tells the room why the exchange stopped early.
    fn note(&self) -> Option<String> {
        Some(match self {
            Stop::Done => return None,
            Stop::ModelCalls => format!(
                "[Stopped: at most {MAX_MODEL_CALLS} model answers per message; send another message to continue]"
            ),
            Stop::Commands { not_run } => format!(
                "[Stopped: at most {MAX_COMMANDS_PER_MESSAGE} commands per message; {not_run} more not run]"
            ),
            Stop::Budget => {
                "[Stopped: not enough of this message's time was left for the model to go on]".into()
            }
            Stop::ModelFailed(why) => format!("[The model could not continue: {why}]"),
            Stop::Waiting(commands) => {
                let listed: Vec<String> = commands
                    .iter()
                    .map(|(id, cmd)| format!("#{id} `{}`", quoted(cmd)))
                    .collect();
                format!("[Waiting for a writer's approval: {}]", listed.join(", "))
            }
            Stop::Off => "[Not run: this room lets the agent run no commands]".into(),
            Stop::Cut(why) => format!(
                "[The model's answer was cut off ({why}); what came is shown, and its commands were not run]"
            ),
        })
    }
}

/// An earlier answer of this exchange and what the model heard back: its
/// results turn (tags), or each tool call with its result (tools).
///
/// Stored with a paused exchange as a list of strings: the answer, the
/// results turn, then each call's id, name, arguments and result. A pair,
/// as stored before tools, reads as the first two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "Vec<String>")]
pub struct FollowUp {
    pub answer: String,
    pub results: String,
    pub calls: Vec<ToolCall>,
    /// What each call's `tool` turn says, in the order of `calls`.
    pub tool_results: Vec<String>,
}

impl From<Vec<String>> for FollowUp {
    fn from(strings: Vec<String>) -> Self {
        let at = |i: usize| strings.get(i).cloned().unwrap_or_default();
        let calls: Vec<&[String]> = strings
            .get(2..)
            .unwrap_or_default()
            .chunks_exact(4)
            .collect();
        Self {
            answer: at(0),
            results: at(1),
            tool_results: calls.iter().map(|call| call[3].clone()).collect(),
            calls: calls
                .iter()
                .flat_map(|call| tools::unflatten(&call[..3]))
                .collect(),
        }
    }
}

impl From<FollowUp> for Vec<String> {
    fn from(follow_up: FollowUp) -> Self {
        let mut strings = vec![follow_up.answer, follow_up.results];
        for (call, result) in follow_up.calls.iter().zip(follow_up.tool_results) {
            strings.extend(tools::flatten(std::slice::from_ref(call)));
            strings.push(result);
        }
        strings
    }
}

impl FollowUp {
    /// What the model hears back after `round`.
    pub fn of(round: &Round) -> Self {
        let (results, tool_results) = if round.calls.is_empty() {
            (results_turn(round), vec![])
        } else {
            (String::new(), tool_results(round))
        };
        Self {
            answer: round.answer.clone(),
            results,
            calls: round.calls.clone(),
            tool_results,
        }
    }
}

/// What an answer asks to run: its tool calls' commands when it made any,
/// else its `<run>` tags' (tags beside calls are not run); its text as the
/// room sees it, without tags; and how many commands it asked for over an
/// answer's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub prose: String,
    pub commands: Vec<Command>,
    pub skipped: usize,
}

pub fn asked(text: &str, calls: &[ToolCall]) -> Asked {
    let parsed = run_tags::parse(text);
    if calls.is_empty() {
        let commands = parsed
            .commands
            .iter()
            .map(|cmd| Command::run(cmd))
            .collect();
        return Asked {
            prose: parsed.prose,
            commands,
            skipped: parsed.skipped,
        };
    }
    let (commands, skipped) = tools::commands(calls);
    Asked {
        prose: parsed.prose,
        commands,
        skipped,
    }
}

/// How many of `asked` commands may run when `run` already have.
pub fn commands_allowed(asked: usize, run: usize) -> usize {
    asked.min(MAX_COMMANDS_PER_MESSAGE.saturating_sub(run))
}

/// The user turn that tells the model what its commands did.
pub fn results_turn(round: &Round) -> String {
    let mut turn = String::from(RESULTS_HEADER);
    for (cmd, outcome) in &round.ran {
        turn.push_str("\n\n");
        turn.push_str(&result(cmd, outcome));
    }
    if round.skipped > 0 {
        turn.push_str(&format!(
            "\n\n{} more command(s) of your answer were not run.",
            round.skipped
        ));
    }
    turn
}

/// What each tool call of `round` hears back: the result of its command,
/// or why it had none.
fn tool_results(round: &Round) -> Vec<String> {
    let mut ran = round.ran.iter();
    round
        .calls
        .iter()
        .map(|call| match tools::command_of(call) {
            Err(why) => format!("error: {why}"),
            Ok(_) => match ran.next() {
                Some((cmd, outcome)) => result(cmd, outcome),
                None => format!("not run: at most {MAX_RUNS_PER_ANSWER} commands per answer"),
            },
        })
        .collect()
}

/// One command's result as the model reads it.
fn result(cmd: &str, outcome: &Outcome) -> String {
    let mut said = format!("$ {cmd}\n");
    match outcome {
        Outcome::Ran(output) => {
            said.push_str(&if output.timed_out {
                format!("timed out (exit code {})", output.exit_code)
            } else {
                format!("exit code {}", output.exit_code)
            });
            for (name, text) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
                said.push_str(&stream(name, text));
            }
        }
        Outcome::Failed(why) => said.push_str(&format!("not run: {why}")),
        Outcome::Job(job) => said.push_str(&job.said(MODEL_OUTPUT_CHARS)),
        Outcome::File(text) => said.push_str(text),
    }
    said
}

fn stream(name: &str, text: &str) -> String {
    if text.is_empty() {
        return format!("\n{name}: (empty)");
    }
    let shown = first_chars(text, MODEL_OUTPUT_CHARS);
    let cut = if shown.len() < text.len() {
        format!("\n[cut: first {MODEL_OUTPUT_CHARS} characters shown]")
    } else {
        String::new()
    };
    format!("\n{name}:\n{}{cut}", shown.trim_end_matches('\n'))
}

/// The reply the room sees: every round's text, then why it stopped early,
/// in at most [`MAX_TEXT_CHARS`] characters: a longer one is cut, says so,
/// and keeps the note.
pub fn reply(rounds: &[Round], stop: &Stop) -> String {
    let body = rounds
        .iter()
        .map(|round| answer_text(&round.prose, &round.ran, round.skipped))
        .filter(|text| !text.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let note = stop.note();
    let whole = paragraphs(&body, note.as_deref());
    if whole.chars().count() <= MAX_TEXT_CHARS {
        return whole;
    }
    let cut = format!("[Cut: the reply was over {MAX_TEXT_CHARS} characters]");
    let tail = paragraphs(&cut, note.as_deref());
    let room = MAX_TEXT_CHARS.saturating_sub(tail.chars().count() + 2);
    let kept = paragraphs(first_chars(&body, room).trim_end(), Some(&tail));
    first_chars(&kept, MAX_TEXT_CHARS).to_owned()
}

/// `first`, then `then` as a paragraph of its own; `first` may be empty.
fn paragraphs(first: &str, then: Option<&str>) -> String {
    match then {
        Some(then) if !first.is_empty() => format!("{first}\n\n{then}"),
        Some(then) => then.to_owned(),
        None => first.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use duet_wire::ExecResult;

    use super::*;

    fn ran(cmd: &str, stdout: &str, exit_code: i32) -> (String, Outcome) {
        (
            cmd.into(),
            Outcome::Ran(ExecResult {
                stdout: stdout.into(),
                exit_code,
                ..ExecResult::default()
            }),
        )
    }

    fn round(prose: &str, ran: Vec<(String, Outcome)>) -> Round {
        Round {
            answer: format!("{prose} <run>…</run>"),
            calls: vec![],
            prose: prose.into(),
            ran,
            skipped: 0,
        }
    }

    #[test]
    fn results_show_command_status_and_both_streams() {
        let mut r = round("Let me look.", vec![ran("cat a", "hello\n", 0)]);
        r.ran.push((
            "make".into(),
            Outcome::Ran(ExecResult {
                stderr: "boom\n".into(),
                exit_code: 2,
                ..ExecResult::default()
            }),
        ));
        r.ran.push((
            "sleep 99".into(),
            Outcome::Failed("the sandbox did not answer".into()),
        ));
        assert_eq!(
            results_turn(&r),
            format!(
                "{RESULTS_HEADER}\n\n$ cat a\nexit code 0\nstdout:\nhello\nstderr: (empty)\
                 \n\n$ make\nexit code 2\nstdout: (empty)\nstderr:\nboom\
                 \n\n$ sleep 99\nnot run: the sandbox did not answer"
            )
        );
    }

    #[test]
    fn the_model_sees_more_output_than_the_room_but_bounded() {
        let long = "x".repeat(MODEL_OUTPUT_CHARS + 10);
        let turn = results_turn(&round("", vec![ran("yes", &long, 0)]));
        assert!(turn.contains(&"x".repeat(MODEL_OUTPUT_CHARS)));
        assert!(!turn.contains(&"x".repeat(MODEL_OUTPUT_CHARS + 1)));
        assert!(turn.ends_with(&format!(
            "[cut: first {MODEL_OUTPUT_CHARS} characters shown]\nstderr: (empty)"
        )));
        let timed_out = Outcome::Ran(ExecResult {
            exit_code: 124,
            timed_out: true,
            ..ExecResult::default()
        });
        let turn = results_turn(&round("", vec![("sleep 9".into(), timed_out)]));
        assert!(turn.contains("timed out (exit code 124)"));
    }

    #[test]
    fn the_reply_holds_every_round_in_order_then_the_final_answer() {
        let rounds = [
            round("Let me look.", vec![ran("ls", "a.txt\n", 0)]),
            round("Now the file.", vec![ran("cat a.txt", "hi\n", 0)]),
            round("It says hi.", vec![]),
        ];
        assert_eq!(
            reply(&rounds, &Stop::Done),
            "Let me look.\n\nOutput (ls):\na.txt\n\nNow the file.\n\nOutput (cat a.txt):\nhi\n\nIt says hi."
        );
    }

    #[test]
    fn an_early_stop_says_why() {
        let rounds = [round("Looking.", vec![ran("ls", "", 0)])];
        for (stop, says) in [
            (Stop::ModelCalls, "at most 4 model answers"),
            (
                Stop::Commands { not_run: 3 },
                "at most 8 commands per message; 3 more",
            ),
            (Stop::Budget, "time"),
            (
                Stop::ModelFailed("it timed out".into()),
                "could not continue: it timed out",
            ),
            (
                Stop::Waiting(vec![(3, "ls".into()), (4, "make all".into())]),
                "Waiting for a writer's approval: #3 `ls`, #4 `make all`]",
            ),
            (Stop::Off, "run no commands"),
            (
                Stop::Cut("the stream broke off".into()),
                "cut off (the stream broke off); what came is shown",
            ),
        ] {
            let text = reply(&rounds, &stop);
            assert!(
                text.starts_with("Looking.\n\nOutput (ls):\n[no output]\n\n["),
                "{text}"
            );
            assert!(text.contains(says), "{text}");
        }
    }

    #[test]
    fn the_reply_is_bounded_like_every_stored_message() {
        // As reported: four answers, each running a 7,900-character command.
        let cmd = format!("echo {}", "y".repeat(7_895));
        let rounds: Vec<Round> = (0..4)
            .map(|i| round(&format!("Round {i}."), vec![ran(&cmd, &"z".repeat(600), 0)]))
            .collect();
        let text = reply(&rounds, &Stop::ModelCalls);
        assert!(
            text.chars().count() <= MAX_TEXT_CHARS,
            "{}",
            text.chars().count()
        );
        assert!(text.ends_with(
            "[Stopped: at most 4 model answers per message; send another message to continue]"
        ));
        assert_eq!(
            text.matches("Output (echo ").count(),
            4,
            "commands quoted cut"
        );
        // Eight blocks of long commands and 8,000 characters of prose.
        let long = round(&"p".repeat(8_000), vec![ran(&cmd, &"z".repeat(600), 0); 8]);
        let text = reply(&[long], &Stop::Done);
        assert_eq!(text.chars().count(), MAX_TEXT_CHARS);
        assert!(text.ends_with(&format!(
            "[Cut: the reply was over {MAX_TEXT_CHARS} characters]"
        )));
        assert!(text.starts_with(&"p".repeat(7_900)));
        // A reply within the bound is whole.
        let short = [round("Done.", vec![ran(&cmd, "ok", 0)])];
        assert!(!reply(&short, &Stop::Done).contains("[Cut"));
    }

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall::new(
            id.into(),
            crate::api::shapes::RUN_COMMAND.into(),
            arguments.into(),
        )
    }

    #[test]
    fn each_tool_call_hears_back_its_result_or_why_it_had_none() {
        let mut r = round(
            "Looking.",
            vec![ran("ls", "a.txt\n", 0), ran("pwd", "/w\n", 0)],
        );
        r.calls = vec![
            call("c1", r#"{"command":"ls"}"#),
            call("c2", r#"{"command":"#),
            call("c3", r#"{"command":"pwd"}"#),
        ];
        let follow_up = FollowUp::of(&r);
        assert_eq!(follow_up.results, "", "no results turn");
        assert_eq!(follow_up.calls, r.calls);
        assert_eq!(
            follow_up.tool_results,
            [
                "$ ls\nexit code 0\nstdout:\na.txt\nstderr: (empty)",
                "error: the arguments of run_command are not a JSON object",
                "$ pwd\nexit code 0\nstdout:\n/w\nstderr: (empty)",
            ]
        );
        // Calls over an answer's limit were not run, and hear so.
        r.ran.pop();
        assert_eq!(
            FollowUp::of(&r).tool_results[2],
            "not run: at most 5 commands per answer"
        );
        // Tags: one results turn, no calls.
        let tagged = FollowUp::of(&round("x", vec![ran("ls", "", 0)]));
        assert!(tagged.results.starts_with(RESULTS_HEADER));
        assert!(tagged.calls.is_empty() && tagged.tool_results.is_empty());
    }

    #[test]
    fn an_answer_asks_through_its_calls_else_its_tags() {
        let tagged = asked("Look: <run>ls</run><run>pwd</run>", &[]);
        assert_eq!(tagged.prose, "Look: ");
        assert_eq!(
            tagged
                .commands
                .iter()
                .map(|c| c.cmd.as_str())
                .collect::<Vec<_>>(),
            ["ls", "pwd"]
        );
        let calls = [
            call("a", r#"{"command":"make","timeoutMs":900}"#),
            call("b", "{"),
        ];
        let called = asked("Building. <run>not this</run>", &calls);
        assert_eq!(called.prose, "Building. ", "calls win over tags");
        assert_eq!(
            called.commands,
            [Command {
                timeout_ms: Some(900),
                ..Command::run("make")
            }]
        );
    }

    #[test]
    fn a_follow_up_stored_as_a_pair_still_reads() {
        let old = FollowUp::from(vec!["a <run>ls</run>".into(), "[results]".into()]);
        assert_eq!(old.answer, "a <run>ls</run>");
        assert_eq!(old.results, "[results]");
        assert!(old.calls.is_empty());
        let mut r = round("x", vec![ran("ls", "", 0)]);
        r.calls = vec![call("c1", r#"{"command":"ls"}"#)];
        let stored: Vec<String> = FollowUp::of(&r).into();
        assert_eq!(FollowUp::from(stored), FollowUp::of(&r));
    }

    #[test]
    fn commands_are_capped_per_message() {
        assert_eq!(commands_allowed(5, 0), 5);
        assert_eq!(commands_allowed(5, 5), 3);
        assert_eq!(commands_allowed(2, 8), 0);
        assert_eq!(commands_allowed(0, 3), 0);
    }
}
