//! The JavaScript reference worker (`bench/reference/index.js`), which the
//! benchmarks set beside this one, keeps the same limits, tells the model
//! the same thing and offers it the same tool. Its constants are read from
//! its source text, so a limit changed on one side only fails here, before
//! any benchmark compares unlike workers.

use std::collections::BTreeMap;

use duet_cf_worker::ai::messages::DEFINITIONS;
use duet_cf_worker::ai::sse::MAX_STREAM_BYTES;
use duet_cf_worker::api::limits::*;
use duet_cf_worker::api::shapes::RUN_COMMAND;
use duet_cf_worker::exchange::budget::{MIN_COMMAND_MS, MIN_MODEL_CALL_MS};
use duet_cf_worker::exchange::context::system_prompt;

const REFERENCE: &str = include_str!("../bench/reference/index.js");
const LIMITS: &str = include_str!("../src/api/limits.rs");

/// The limits the reference keeps that are not in `src/api/limits.rs`.
const ELSEWHERE: [&str; 3] = ["MIN_COMMAND_MS", "MIN_MODEL_CALL_MS", "MAX_STREAM_BYTES"];

/// Every limit of `src/api/limits.rs`, by name, and the least times worth
/// giving a model call and a command (`exchange::budget`) and the bound of a
/// streamed answer (`ai::sse`), which the reference keeps among its
/// limits.
fn rust_limits() -> BTreeMap<&'static str, u64> {
    macro_rules! by_name {
        ($($name:ident),* $(,)?) => {
            BTreeMap::from([$((stringify!($name), $name as u64)),*])
        };
    }
    by_name![
        MAX_BODY_BYTES,
        MAX_ROOM_ID_CHARS,
        MAX_TEXT_CHARS,
        MAX_USER_ID_CHARS,
        MAX_CMD_CHARS,
        HISTORY_LIMIT,
        MAX_RUNS_PER_ANSWER,
        MAX_MODEL_CALLS,
        MAX_COMMANDS_PER_MESSAGE,
        MODEL_OUTPUT_CHARS,
        SUMMARY_CHARS,
        QUOTED_CMD_CHARS,
        MAX_HISTORY_CONTEXT_CHARS,
        MAX_MODEL_ANSWER_CHARS,
        AI_TIMEOUT_MS,
        MESSAGE_BUDGET_MS,
        EXEC_DEFAULT_TIMEOUT_MS,
        EXEC_MAX_TIMEOUT_MS,
        SANDBOXD_MARGIN_MS,
        MIN_MODEL_CALL_MS,
        MIN_COMMAND_MS,
        SANDBOX_DESTROY_MS,
        CONTAINER_START_MS,
        RESTORE_MS,
        COLD_START_ALLOWANCE_MS,
        EXEC_ANSWER_MS,
        SANDBOX_IDLE_SECONDS,
        ROOM_TTL_SECONDS,
        SANDBOX_ARCHIVE_MAX_BYTES,
        MAX_WATCHERS,
        MAX_UNACKED_EVENTS,
        MAX_WATCHER_FRAME_BYTES,
        FEED_LOG_EVENTS,
        FEED_LOG_BYTES,
        RECENT_TERMINAL_BYTES,
        HEARTBEAT_MS,
        INVITE_DEFAULT_TTL_SECONDS,
        INVITE_MAX_TTL_SECONDS,
        MAX_POLICY_RULES,
        MAX_RULE_CHARS,
        APPROVAL_TIMEOUT_SECONDS,
        MCP_APPROVAL_WAIT_MS,
        MAX_MCP_CALLS,
        AUDIT_ENTRIES,
        AUDIT_CMD_CHARS,
        DELTA_INTERVAL_MS,
        ENDED_JOBS_KEPT,
        JOB_OUTPUT_TAIL_BYTES,
        JOB_LOG_BYTES,
        JOB_LOG_EVENTS,
        JOB_MAX_SECONDS,
        FILE_TRANSFER_MS,
        MAX_STREAM_BYTES,
    ]
}

/// The reference's limits section: `const NAME = <integer expression>;`
/// lines, evaluated (products and sums of integers).
fn reference_limits() -> BTreeMap<String, u64> {
    let section = REFERENCE
        .split("// ---- limits")
        .nth(1)
        .expect("the reference has a limits section");
    let section = &section[..section.find("\n\n").expect("the section ends")];
    section
        .lines()
        .skip(1)
        .map(|line| {
            let (name, value) = line
                .strip_prefix("const ")
                .and_then(|l| l.strip_suffix(';'))
                .and_then(|l| l.split_once(" = "))
                .unwrap_or_else(|| panic!("not a limit: {line}"));
            (name.to_owned(), evaluate(value))
        })
        .collect()
}

fn evaluate(expression: &str) -> u64 {
    expression
        .split('+')
        .map(|term| {
            term.split('*')
                .map(|factor| {
                    factor
                        .trim()
                        .replace('_', "")
                        .parse::<u64>()
                        .unwrap_or_else(|_| panic!("not an integer: {factor}"))
                })
                .product::<u64>()
        })
        .sum()
}

#[test]
fn every_limit_is_listed_here() {
    let declared: Vec<&str> = LIMITS
        .lines()
        .filter_map(|l| l.strip_prefix("pub const "))
        .map(|l| &l[..l.find(':').expect("a typed constant")])
        .collect();
    let listed: Vec<&str> = rust_limits()
        .into_keys()
        .filter(|name| !ELSEWHERE.contains(name))
        .collect();
    let mut declared_sorted = declared.clone();
    declared_sorted.sort_unstable();
    assert_eq!(
        declared_sorted, listed,
        "rust_limits() lists src/api/limits.rs"
    );
}

#[test]
fn the_reference_keeps_the_same_limits() {
    let rust = rust_limits();
    let reference = reference_limits();
    assert!(reference.len() > 20, "{} limits read", reference.len());
    for (name, value) in &reference {
        let ours = rust
            .get(name.as_str())
            .unwrap_or_else(|| panic!("the reference's {name} is no limit of ours"));
        assert_eq!(value, ours, "{name}");
    }
}

/// The template literal that follows `start` in the reference, its
/// placeholders filled: the limits, the tool's name, and `how` if given.
fn template(start: &str, how: Option<&str>) -> String {
    let text = REFERENCE
        .split(start)
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("the reference has {start}"));
    // A backslash at a line's end continues the template literal.
    let mut text = text.replace("\\\n", "");
    for (name, value) in reference_limits() {
        text = text.replace(&format!("${{{name}}}"), &value.to_string());
    }
    text = text.replace("${RUN_COMMAND}", RUN_COMMAND);
    if let Some(how) = how {
        text = text.replace("${how}", how);
    }
    assert!(
        !text.contains("${"),
        "every placeholder is a limit or the tool's name: {text}"
    );
    text
}

#[test]
fn the_reference_tells_the_model_the_same_thing() {
    for (tools, how) in [(false, "  tags: `"), (true, "  tools: `")] {
        let how = template(how, None);
        let prompt = template("const systemPrompt = (how) => `", Some(&how));
        assert_eq!(prompt, system_prompt(tools), "tools: {tools}");
    }
    assert!(REFERENCE.contains(&format!("const RUN_COMMAND = \"{RUN_COMMAND}\";")));
}

#[test]
fn the_reference_offers_the_same_tool() {
    let tools = template("const TOOLS = JSON.parse(`", None);
    let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
    assert_eq!(parse(&tools), parse(DEFINITIONS));
}
