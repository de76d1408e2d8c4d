//! What the model sees for one message: a system prompt, the room's recent
//! history, the new message, and, when it is asked again within the same
//! exchange, each of its earlier answers followed by the results of their
//! commands (see `rounds`). Both AI backends send exactly this.
//!
//! The history sent is bounded by [`MAX_HISTORY_CONTEXT_CHARS`]: the most
//! recent whole exchanges that fit, starting with a user turn. The system
//! prompt and the new message are always sent.

use std::sync::OnceLock;

use crate::ai::messages::ChatMessage;
use crate::api::limits::{
    MAX_COMMANDS_PER_MESSAGE, MAX_HISTORY_CONTEXT_CHARS, MAX_MODEL_CALLS, MAX_RUNS_PER_ANSWER,
};
use crate::api::shapes::{Message, Role};
use crate::api::shapes::{JOB_STATUS, RUN_COMMAND, START_JOB, STOP_JOB};
use crate::exchange::rounds::FollowUp;
use crate::files::{EDIT_FILE, LIST_FILES, READ_FILE, WRITE_FILE};

/// Tells the model how to behave in a shared terminal room, with the limits
/// the exchange enforces (`rounds`), so the two cannot disagree; `tools`
/// when it asks through the tools (`exchange::tools`), not tags, and so may
/// start jobs.
pub fn system_prompt(tools: bool) -> &'static str {
    static PROMPTS: OnceLock<[String; 2]> = OnceLock::new();
    let prompts = PROMPTS.get_or_init(|| {
        let how = [
            format!(
                "To run a command, write it exactly, alone, inside <run>...</run>, for example \
                 <run>ls -la</run>. Use at most {MAX_RUNS_PER_ANSWER} <run> tags in one answer. \
                 After your answer the commands run in order, and you get their results (exit \
                 code and output) in a message marked as coming from the sandbox; you may then \
                 run more commands the same way, or give your final answer without <run> tags."
            ),
            format!(
                "To run a command, call the {RUN_COMMAND} tool; call it at most \
                 {MAX_RUNS_PER_ANSWER} times in one answer. After your answer the commands run \
                 in order, and you get each result (exit code and output) back; you may then \
                 run more commands the same way, or give your final answer without calling it. \
                 For anything that may take longer than a few seconds (installs, builds, test \
                 suites, servers), start a job with {START_JOB} and check on it with \
                 {JOB_STATUS} rather than waiting for it; {STOP_JOB} stops one. To look at \
                 files use {READ_FILE} and {LIST_FILES}; to change one, use {EDIT_FILE} (one \
                 exact match) or {WRITE_FILE} (the whole file) rather than shell commands."
            ),
        ];
        how.map(|how| {
            format!(
                "You are Duet, a pair-programming assistant in a shared terminal room. Several \
                 people may talk to you; be concise and practical. You can run shell commands \
                 in the room's Linux sandbox (bash; files and the working directory persist \
                 between commands). {how} You have at most {MAX_MODEL_CALLS} answers and \
                 {MAX_COMMANDS_PER_MESSAGE} commands per user message, so plan them. Everyone \
                 in the room sees your answers and a short summary of each command's output. \
                 Never invent or predict a command's output. Only run commands that help with \
                 what was asked; never run destructive commands unless asked."
            )
        })
    });
    &prompts[usize::from(tools)]
}

/// Builds the model's input: system prompt, the stored history that fits
/// (oldest first), new text, then each earlier answer of this exchange and
/// what followed it: a results turn, or a `tool` turn per call.
pub fn build<'a>(
    history: &'a [Message],
    text: &'a str,
    follow_ups: &'a [FollowUp],
    tools: bool,
) -> Vec<ChatMessage<'a>> {
    let system = ChatMessage::text("system", system_prompt(tools));
    let past = recent_that_fit(history).iter().map(|m| {
        let role = match m.role {
            Role::User => "user",
            Role::Agent => "assistant",
        };
        ChatMessage::text(role, &m.text)
    });
    let mut context: Vec<ChatMessage<'a>> = std::iter::once(system)
        .chain(past)
        .chain(std::iter::once(ChatMessage::text("user", text)))
        .collect();
    for follow_up in follow_ups {
        if follow_up.calls.is_empty() {
            context.push(ChatMessage::text("assistant", &follow_up.answer));
            context.push(ChatMessage::text("user", &follow_up.results));
            continue;
        }
        context.push(ChatMessage {
            role: "assistant",
            content: Some(follow_up.answer.as_str()).filter(|text| !text.is_empty()),
            tool_calls: &follow_up.calls,
            tool_call_id: None,
        });
        for (call, result) in follow_up.calls.iter().zip(&follow_up.tool_results) {
            context.push(ChatMessage {
                role: "tool",
                content: Some(result),
                tool_calls: &[],
                tool_call_id: Some(&call.id),
            });
        }
    }
    context
}

/// The longest suffix of `history` within [`MAX_HISTORY_CONTEXT_CHARS`]
/// that starts with a user turn, so the model sees whole exchanges.
fn recent_that_fit(history: &[Message]) -> &[Message] {
    let mut used = 0;
    let mut start = history.len();
    for (at, message) in history.iter().enumerate().rev() {
        used += message.text.chars().count();
        if used > MAX_HISTORY_CONTEXT_CHARS {
            break;
        }
        start = at;
    }
    let kept = &history[start..];
    let first_user = kept
        .iter()
        .position(|m| m.role == Role::User)
        .unwrap_or(kept.len());
    &kept[first_user..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai::messages::ToolCall;

    /// The number written right after each `before` in the prompt, if any.
    fn numbers_after(prompt: &str, before: &str) -> Vec<Option<usize>> {
        prompt
            .match_indices(before)
            .map(|(at, _)| {
                let rest = &prompt[at + before.len()..];
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .collect()
    }

    #[test]
    fn the_prompt_states_the_limits_the_exchange_keeps() {
        for tools in [false, true] {
            let prompt = system_prompt(tools);
            assert_eq!(
                numbers_after(prompt, "at most "),
                [Some(MAX_RUNS_PER_ANSWER), Some(MAX_MODEL_CALLS)]
            );
            assert!(numbers_after(prompt, "answers and ").contains(&Some(MAX_COMMANDS_PER_MESSAGE)));
        }
        assert!(system_prompt(false).contains("<run>"));
        assert!(!system_prompt(true).contains("<run>"));
        assert!(system_prompt(true).contains(RUN_COMMAND));
        assert!(system_prompt(true).contains("check on it with job_status rather than waiting"));
        assert!(!system_prompt(false).contains(START_JOB));
    }

    #[test]
    fn system_then_history_then_new_message() {
        let history = vec![
            Message {
                role: Role::User,
                user_id: Some("ana".into()),
                text: "hi".into(),
                ts: 1,
            },
            Message {
                role: Role::Agent,
                user_id: None,
                text: "hello".into(),
                ts: 2,
            },
        ];
        let context = build(&history, "list files", &[], false);
        let roles: Vec<_> = context.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(context[3].content, Some("list files"));
        assert_eq!(context[2].content, Some("hello"));
        assert_eq!(context[0].content, Some(system_prompt(false)));
        assert_eq!(
            build(&history, "x", &[], true)[0].content,
            Some(system_prompt(true))
        );
    }

    #[test]
    fn follow_ups_come_after_the_new_message_as_answer_then_results() {
        let follow_ups = [FollowUp {
            answer: "a <run>ls</run>".into(),
            results: "[results]".into(),
            calls: vec![],
            tool_results: vec![],
        }];
        let context = build(&[], "list files", &follow_ups, false);
        let turns: Vec<_> = context
            .iter()
            .map(|m| (m.role, m.content.unwrap()))
            .collect();
        assert_eq!(
            turns[1..],
            [
                ("user", "list files"),
                ("assistant", "a <run>ls</run>"),
                ("user", "[results]")
            ]
        );
    }

    #[test]
    fn tool_calls_are_answered_by_one_tool_turn_each() {
        let call = |id: &str| ToolCall::new(id.into(), RUN_COMMAND.into(), "{}".into());
        let follow_ups = [
            FollowUp {
                answer: String::new(),
                results: String::new(),
                calls: vec![call("a"), call("b")],
                tool_results: vec!["one".into(), "two".into()],
            },
            FollowUp {
                answer: "Let me see.".into(),
                results: String::new(),
                calls: vec![call("c")],
                tool_results: vec!["three".into()],
            },
        ];
        let json = serde_json::to_value(build(&[], "go", &follow_ups, true)).unwrap();
        let turns = &json.as_array().unwrap()[2..];
        assert_eq!(turns[0]["role"], "assistant");
        assert_eq!(
            turns[0]["content"],
            serde_json::Value::Null,
            "no text: null"
        );
        assert_eq!(turns[0]["tool_calls"][1]["id"], "b");
        assert_eq!(
            turns[1],
            serde_json::json!({"role": "tool", "content": "one", "tool_call_id": "a"})
        );
        assert_eq!(turns[2]["tool_call_id"], "b");
        assert_eq!(turns[3]["content"], "Let me see.");
        assert_eq!(turns[4]["content"], "three");
        assert_eq!(turns.len(), 5);
        assert!(
            json[1].get("tool_calls").is_none(),
            "plain turns carry no calls"
        );
    }

    fn exchange(n: usize, chars: usize) -> [Message; 2] {
        let text = format!("{n}{}", "x".repeat(chars - 1));
        [
            Message {
                role: Role::User,
                user_id: None,
                text: text.clone(),
                ts: 1,
            },
            Message {
                role: Role::Agent,
                user_id: None,
                text,
                ts: 2,
            },
        ]
    }

    #[test]
    fn long_history_drops_the_oldest_exchanges_first() {
        // Ten exchanges of 2 × 8,000 characters: 160,000 in all.
        let history: Vec<Message> = (0..10).flat_map(|n| exchange(n, 8_000)).collect();
        let context = build(&history, "now", &[], false);
        assert_eq!(context.first().unwrap().role, "system");
        assert_eq!(context.last().unwrap().content, Some("now"));
        let past = &context[1..context.len() - 1];
        let chars: usize = past
            .iter()
            .map(|m| m.content.unwrap().chars().count())
            .sum();
        assert!(chars <= MAX_HISTORY_CONTEXT_CHARS, "{chars}");
        assert_eq!(past.len(), 2, "the newest whole exchange");
        assert!(past[0].content.unwrap().starts_with('9'));
        assert_eq!(past[0].role, "user");
    }

    #[test]
    fn history_that_fits_is_sent_whole() {
        let history: Vec<Message> = (0..10).flat_map(|n| exchange(n, 100)).collect();
        assert_eq!(build(&history, "now", &[], false).len(), 22);
    }

    #[test]
    fn a_kept_suffix_never_starts_with_an_agent_turn() {
        let mut history: Vec<Message> = exchange(0, 7_000).into();
        history.extend(exchange(1, 4_000));
        // 4,000 + 4,000 + 7,000 fit, the first user turn does not: its agent
        // reply is left out too.
        let context = build(&history, "now", &[], false);
        let roles: Vec<_> = context.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert!(context[1].content.unwrap().starts_with('1'));
    }

    #[test]
    fn an_oversized_history_is_left_out_entirely() {
        let history: Vec<Message> = exchange(0, MAX_HISTORY_CONTEXT_CHARS + 1).into();
        assert_eq!(build(&history, "now", &[], false).len(), 2);
    }
}
