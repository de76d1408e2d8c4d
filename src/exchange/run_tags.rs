//! `<run>…</run>` tags in a model answer: finding the commands, and turning
//! their outcomes into the text the room sees for that answer.
//!
//! That text is the answer with every complete `<run>…</run>` span removed,
//! then one block per command, in order:
//!
//! ```text
//! Output (<cmd>):
//! <first 500 characters of stdout, else of stderr, else "[no output]">
//! ```
//!
//! or `Error (<cmd>):` and the reason when the sandbox could not run it. A
//! command longer than [`QUOTED_CMD_CHARS`] is quoted cut, ending in `…`: a
//! reply quotes up to eight commands of up to 8,000 characters each.

use std::borrow::Cow;

use duet_wire::ExecResult;

use crate::api::limits::{MAX_RUNS_PER_ANSWER, QUOTED_CMD_CHARS, SUMMARY_CHARS};
use crate::jobs::Seen;
use crate::text::{first_chars, without_controls};

/// The tags around a command.
pub const RUN: (&str, &str) = ("<run>", "</run>");

/// What became of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It ran (whatever its exit code).
    Ran(ExecResult),
    /// The sandbox could not run it, and why.
    Failed(String),
    /// A job it started, told of or stopped (`exchange::tools`), as it stood.
    Job(Seen),
    /// What a file tool answered (`files::tools`), bounded there.
    File(String),
}

/// The answer split into its prose and its commands.
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The answer with every `<run>…</run>` span removed.
    pub prose: String,
    /// Non-empty command bodies, trimmed, in order; at most [`MAX_RUNS_PER_ANSWER`].
    pub commands: Vec<&'a str>,
    /// Commands beyond the limit, which are not run.
    pub skipped: usize,
}

pub fn parse(answer: &str) -> Parsed<'_> {
    let mut prose = String::with_capacity(answer.len());
    let mut commands = Vec::new();
    let mut rest = answer;
    while let Some((before, body, after)) = next_span(rest) {
        prose.push_str(before);
        let cmd = body.trim();
        if !cmd.is_empty() {
            commands.push(cmd);
        }
        rest = after;
    }
    prose.push_str(rest);
    let skipped = commands.len().saturating_sub(MAX_RUNS_PER_ANSWER);
    commands.truncate(MAX_RUNS_PER_ANSWER);
    Parsed {
        prose,
        commands,
        skipped,
    }
}

/// The next complete span as (text before it, its body, text after it).
fn next_span(text: &str) -> Option<(&str, &str, &str)> {
    let (open, close) = RUN;
    let start = text.find(open)?;
    let body_start = start + open.len();
    let body_len = text[body_start..].find(close)?;
    let body_end = body_start + body_len;
    Some((
        &text[..start],
        &text[body_start..body_end],
        &text[body_end + close.len()..],
    ))
}

/// The first [`SUMMARY_CHARS`] characters of stdout, else of stderr, else
/// `[no output]`, as chat text (no terminal control sequences).
pub fn summary(stdout: &str, stderr: &str) -> String {
    let (out, err) = (without_controls(stdout), without_controls(stderr));
    let text = if !out.is_empty() { out } else { err };
    if text.is_empty() {
        "[no output]".to_owned()
    } else {
        first_chars(&text, SUMMARY_CHARS).to_owned()
    }
}

/// What the room sees of one answer: its prose, one block per command run,
/// and a note on commands left out beyond [`MAX_RUNS_PER_ANSWER`].
pub fn answer_text(prose: &str, ran: &[(String, Outcome)], skipped: usize) -> String {
    let mut text = prose.trim_end().to_owned();
    for (cmd, outcome) in ran {
        let cmd = quoted(cmd);
        match outcome {
            // One blank line between blocks, whatever newline ends the output.
            Outcome::Ran(output) => text.push_str(&format!(
                "\n\nOutput ({cmd}):\n{}",
                summary(&output.stdout, &output.stderr).trim_end_matches('\n')
            )),
            Outcome::Failed(why) => {
                text.push_str(&format!("\n\nError ({cmd}):\n{}", without_controls(why)))
            }
            Outcome::Job(job) => text.push_str(&format!(
                "\n\nOutput ({cmd}):\n{}",
                without_controls(&job.said(SUMMARY_CHARS))
            )),
            Outcome::File(said) => text.push_str(&format!(
                "\n\nOutput ({cmd}):\n{}",
                summary(said, "").trim_end_matches('\n')
            )),
        }
    }
    if skipped > 0 {
        text.push_str(&format!(
            "\n\n[{skipped} more command(s) not run: at most {MAX_RUNS_PER_ANSWER} run per answer]"
        ));
    }
    text.trim().to_owned()
}

/// A command as its block's header quotes it.
pub fn quoted(cmd: &str) -> Cow<'_, str> {
    let shown = first_chars(cmd, QUOTED_CMD_CHARS);
    match shown.len() < cmd.len() {
        true => Cow::Owned(format!("{shown}…")),
        false => Cow::Borrowed(cmd),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(stdout: &str, stderr: &str) -> Outcome {
        Outcome::Ran(ExecResult {
            stdout: stdout.into(),
            stderr: stderr.into(),
            ..ExecResult::default()
        })
    }

    /// The text of an answer whose commands all had `outcomes`.
    fn text_of(parsed: &Parsed<'_>, outcomes: &[Outcome]) -> String {
        let ran: Vec<(String, Outcome)> = parsed
            .commands
            .iter()
            .map(|cmd| cmd.to_string())
            .zip(outcomes.iter().cloned())
            .collect();
        answer_text(&parsed.prose, &ran, parsed.skipped)
    }

    #[test]
    fn finds_commands_in_order_and_removes_spans() {
        let p = parse("Let me look.\n<run> ls -la </run> then <run>pwd</run><run>  </run> done");
        assert_eq!(p.commands, ["ls -la", "pwd"]);
        assert_eq!(p.prose, "Let me look.\n then  done");
        assert_eq!(p.skipped, 0);
    }

    #[test]
    fn multi_line_bodies_and_unclosed_tags() {
        let p = parse("<run>cd sub\nls</run> and <run>never closed");
        assert_eq!(p.commands, ["cd sub\nls"]);
        assert_eq!(p.prose, " and <run>never closed");
    }

    #[test]
    fn at_most_five_commands() {
        let answer: String = (0..7).map(|i| format!("<run>echo {i}</run>")).collect();
        let p = parse(&answer);
        assert_eq!(p.commands.len(), MAX_RUNS_PER_ANSWER);
        assert_eq!(p.commands[4], "echo 4");
        assert_eq!(p.skipped, 2);
        let outcomes = vec![ran("x", ""); 5];
        assert!(text_of(&p, &outcomes)
            .ends_with("[2 more command(s) not run: at most 5 run per answer]"));
    }

    #[test]
    fn blocks_are_a_blank_line_apart() {
        let p = parse("<run>echo one</run><run>echo two</run>");
        assert_eq!(
            text_of(&p, &[ran("one\n", ""), ran("two\n\n", "")]),
            "Output (echo one):\none\n\nOutput (echo two):\ntwo"
        );
    }

    #[test]
    fn summaries_prefer_stdout_then_stderr() {
        assert_eq!(summary("out", "err"), "out");
        assert_eq!(summary("", "err"), "err");
        assert_eq!(summary("", ""), "[no output]");
        assert_eq!(summary(&"a".repeat(600), ""), "a".repeat(500));
    }

    #[test]
    fn summaries_are_chat_text() {
        assert_eq!(
            summary("\u{1b}[2J\u{1b}]0;pwned\u{7}files\r\n", ""),
            "files\n"
        );
        assert_eq!(summary("\u{1b}[0m", "err"), "err");
        let colored = format!("\u{1b}[32m{}", "a".repeat(600));
        assert_eq!(summary(&colored, ""), "a".repeat(500), "cut after cleaning");
    }

    #[test]
    fn cut_never_splits_a_character() {
        let text = format!("{}é🌍tail", "a".repeat(498));
        let cut = summary(&text, "");
        assert_eq!(cut.chars().count(), 500);
        assert!(cut.ends_with("é🌍"));
    }

    #[test]
    fn answer_blocks() {
        let p = parse("I'll create the file for you.\n<run>echo 'Hello World' > hello.txt</run>");
        assert_eq!(
            text_of(&p, &[ran("", "")]),
            "I'll create the file for you.\n\nOutput (echo 'Hello World' > hello.txt):\n[no output]"
        );
        let p = parse("<run>ls</run>");
        assert_eq!(
            text_of(&p, &[Outcome::Failed("sandbox unavailable".into())]),
            "Error (ls):\nsandbox unavailable"
        );
    }

    #[test]
    fn long_commands_are_quoted_cut() {
        let long = format!("echo {}", "x".repeat(7_900));
        let ran = [(long.clone(), ran("x", ""))];
        let text = answer_text("", &ran, 0);
        let header = text.lines().next().unwrap();
        assert_eq!(
            header,
            format!("Output ({}…):", first_chars(&long, QUOTED_CMD_CHARS))
        );
        let fits = "é".repeat(QUOTED_CMD_CHARS);
        let text = answer_text("", &[(fits.clone(), Outcome::Failed("no".into()))], 0);
        assert_eq!(text, format!("Error ({fits}):\nno"));
    }

    #[test]
    fn plain_answers_pass_through_trimmed() {
        let p = parse("  just text \n");
        assert!(p.commands.is_empty());
        assert_eq!(text_of(&p, &[]), "just text");
    }
}
