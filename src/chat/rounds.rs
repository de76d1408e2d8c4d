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

use crate::api::limits::{
    MAX_COMMANDS_PER_MESSAGE, MAX_MODEL_CALLS, MAX_TEXT_CHARS, MODEL_OUTPUT_CHARS,
};
use crate::chat::run_tags::{answer_text, quoted, Outcome};
use crate::text::first_chars;

/// How a results turn begins, so the model can tell it from a person.
pub const RESULTS_HEADER: &str = "[Results of your commands, from the room's sandbox]";

/// One answer of the model and what came of its commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    /// The answer as the model wrote it, tags included: its own turn when
    /// it is asked again.
    pub answer: String,
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
        })
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
        turn.push_str(&format!("\n\n$ {cmd}\n"));
        match outcome {
            Outcome::Ran(output) => {
                let status = if output.timed_out {
                    format!("timed out (exit code {})", output.exit_code)
                } else {
                    format!("exit code {}", output.exit_code)
                };
                turn.push_str(&status);
                for (name, text) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
                    turn.push_str(&stream(name, text));
                }
            }
            Outcome::Failed(why) => turn.push_str(&format!("not run: {why}")),
        }
    }
    if round.skipped > 0 {
        turn.push_str(&format!(
            "\n\n{} more command(s) of your answer were not run.",
            round.skipped
        ));
    }
    turn
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

    #[test]
    fn commands_are_capped_per_message() {
        assert_eq!(commands_allowed(5, 0), 5);
        assert_eq!(commands_allowed(5, 5), 3);
        assert_eq!(commands_allowed(2, 8), 0);
        assert_eq!(commands_allowed(0, 3), 0);
    }
}
