//! The agent's native tools, for models that call functions in the OpenAI
//! shape: `run_command {command, timeoutMs?}`, and for commands that take
//! longer, `start_job {cmd, name?}`, `job_status {jobId}` and `stop_job
//! {jobId}` (`jobs`); offered in the model's input as `tools`, answered
//! with `tool_calls`, and given back as one `tool` turn per call, with its
//! id. A call is the same command a `<run>` tag would be: the same rounds,
//! limits, policy and budget, and the same `Output` blocks in the room's
//! reply; only how the model asks for it, and how it hears back, differ. A
//! job's start is a command for the room's policy; telling of a job or
//! stopping it runs nothing new, so the policy is not asked. An MCP
//! client's calls of the same tools are read here too (`agent::mcp`).
//!
//! A call the worker cannot carry out (an unknown tool, arguments that are
//! not the JSON object the schema asks for) is answered as an error turn
//! the model can read and correct, never a failure of the exchange.
//!
//! The file tools, `read_file {path, offset?, limit?}`, `list_files
//! {path?}`, `write_file {path, content}` and `edit_file {path, old_text,
//! new_text}` (`files::tools`), are carried out by the Sandbox object
//! without the shell. A write or an edit is judged by the room's file
//! rules as a command is by its command rules (`approvals::policy`);
//! reading changes nothing, so it is not asked.

use serde_json::Value;

use crate::ai::messages::ToolCall;
use crate::api::limits::MAX_RUNS_PER_ANSWER;
use crate::api::shapes::{JOB_STATUS, RUN_COMMAND, START_JOB, STOP_JOB};
use crate::api::validate;
use crate::files::tools::FileTool;
use crate::files::{EDIT_FILE, LIST_FILES, READ_FILE, WRITE_FILE};
use crate::room::calls::{Command, Kind};
use crate::terminal::{MAX_FRAME_BYTES, WRITE_TERMINAL};

/// Calls as strings, each its id, name and arguments: how they are stored.
/// A string list is read by a parser the worker has anyway, where derived
/// structs would each add one to the upload.
pub fn flatten(calls: &[ToolCall]) -> Vec<String> {
    calls
        .iter()
        .flat_map(|call| {
            [
                call.id.clone(),
                call.function.name.clone(),
                call.function.arguments.clone(),
            ]
        })
        .collect()
}

/// The calls [`flatten`] stored; an incomplete last one is dropped.
pub fn unflatten(strings: &[String]) -> Vec<ToolCall> {
    strings
        .chunks_exact(3)
        .map(|call| ToolCall::new(call[0].clone(), call[1].clone(), call[2].clone()))
        .collect()
}

/// The command `call` asks for, or why it asks for none (the text of its
/// error turn).
pub fn command_of(call: &ToolCall) -> Result<Command, String> {
    let name = &call.function.name;
    let arguments: Value = serde_json::from_str(&call.function.arguments)
        .map_err(|_| format!("the arguments of {name} are not a JSON object"))?;
    asked(name, &arguments)
}

/// The command a call of tool `name` with `arguments` asks for, or why it
/// asks for none.
pub fn asked(name: &str, arguments: &Value) -> Result<Command, String> {
    let job = |kind: fn(u64) -> Kind| {
        let job = validate::job_named(arguments)?;
        Ok(Command {
            cmd: format!("{name} {}", crate::api::route::job_id(job)),
            timeout_ms: None,
            kind: kind(job),
        })
    };
    match name {
        RUN_COMMAND => {
            let (cmd, timeout_ms) = validate::run_command(arguments)?;
            Ok(Command {
                cmd,
                timeout_ms,
                kind: Kind::Run,
            })
        }
        START_JOB => {
            let (cmd, name) = validate::start_job(arguments)?;
            Ok(Command {
                cmd,
                timeout_ms: None,
                kind: Kind::StartJob(name),
            })
        }
        JOB_STATUS => job(Kind::JobStatus),
        STOP_JOB => job(Kind::StopJob),
        WRITE_TERMINAL => match arguments["data"].as_str() {
            Some(data) if !data.is_empty() && data.len() <= MAX_FRAME_BYTES => Ok(Command {
                cmd: data.to_owned(),
                timeout_ms: None,
                kind: Kind::Terminal,
            }),
            _ => Err(format!(
                "{WRITE_TERMINAL} needs `data`, the keys to type: 1 to {MAX_FRAME_BYTES} bytes"
            )),
        },
        _ => match FileTool::asked(name, arguments) {
            Some(asked) => asked.map(|(tool, path)| Command {
                cmd: format!("{name} {path}"),
                timeout_ms: None,
                kind: Kind::File { tool, path },
            }),
            None => Err(format!(
                "there is no tool `{name}`; the tools are {RUN_COMMAND}, {START_JOB}, {JOB_STATUS}, \
                 {STOP_JOB}, {READ_FILE}, {LIST_FILES}, {WRITE_FILE} and {EDIT_FILE}"
            )),
        },
    }
}

/// The commands of an answer's calls, in order, at most
/// [`MAX_RUNS_PER_ANSWER`], and how many more there were.
pub fn commands(calls: &[ToolCall]) -> (Vec<Command>, usize) {
    let mut commands: Vec<Command> = calls.iter().filter_map(|c| command_of(c).ok()).collect();
    let skipped = commands.len().saturating_sub(MAX_RUNS_PER_ANSWER);
    commands.truncate(MAX_RUNS_PER_ANSWER);
    (commands, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::limits::{EXEC_MAX_TIMEOUT_MS, MODEL_OUTPUT_CHARS};
    use crate::approvals::policy::{Policy, Verdict};

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall::new("call_1".into(), name.into(), arguments.into())
    }

    #[test]
    fn the_definitions_are_json_and_state_the_limits() {
        let tools: Value = serde_json::from_str(crate::ai::messages::DEFINITIONS).unwrap();
        let function = &tools[0]["function"];
        assert_eq!(function["name"], RUN_COMMAND);
        assert_eq!(
            function["parameters"]["properties"]["timeoutMs"]["maximum"],
            EXEC_MAX_TIMEOUT_MS
        );
        let description = function["description"].as_str().unwrap();
        assert!(description.contains(&format!("At most {MAX_RUNS_PER_ANSWER} commands")));
        let names: Vec<&Value> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["function"]["name"])
            .collect();
        assert_eq!(
            names,
            [
                RUN_COMMAND,
                START_JOB,
                JOB_STATUS,
                STOP_JOB,
                READ_FILE,
                LIST_FILES,
                WRITE_FILE,
                EDIT_FILE
            ]
        );
        let status = tools[2]["function"]["description"].as_str().unwrap();
        assert!(status.contains(&format!("last {MODEL_OUTPUT_CHARS} bytes")));
    }

    #[test]
    fn a_call_asks_for_its_command_and_time_limit() {
        assert_eq!(
            command_of(&call(RUN_COMMAND, r#"{"command": " ls -la "}"#)),
            Ok(Command::run("ls -la"))
        );
        assert_eq!(
            command_of(&call(
                RUN_COMMAND,
                r#"{"command": "make", "timeoutMs": 3000}"#
            )),
            Ok(Command {
                timeout_ms: Some(3000),
                ..Command::run("make")
            })
        );
    }

    #[test]
    fn job_calls_ask_for_a_job_and_only_its_start_is_judged() {
        let start = command_of(&call(START_JOB, r#"{"cmd": " make ", "name": "build"}"#));
        let start = start.unwrap();
        assert_eq!(
            (start.cmd.as_str(), &start.kind),
            ("make", &Kind::StartJob(Some("build".into())))
        );
        let status = command_of(&call(JOB_STATUS, r#"{"jobId": "j00000000000000ff"}"#)).unwrap();
        assert_eq!(
            (status.cmd.as_str(), &status.kind),
            ("job_status j00000000000000ff", &Kind::JobStatus(255))
        );
        let mut off = Policy::new(crate::approvals::policy::AgentCommands::Off);
        off.deny = vec!["job_status".into()];
        assert_eq!(status.judged(&off), Verdict::Run { rule: None });
        assert_eq!(start.judged(&off), Verdict::Off);
        for (name, arguments, says) in [
            (START_JOB, r#"{"command": "make"}"#, "start_job needs `cmd`"),
            (STOP_JOB, r#"{"jobId": "j1"}"#, "`jobId` must be a job's id"),
            (JOB_STATUS, "{}", "`jobId` must be a job's id"),
        ] {
            let why = command_of(&call(name, arguments)).unwrap_err();
            assert!(why.contains(says), "{arguments}: {why}");
        }
    }

    #[test]
    fn malformed_calls_say_what_is_wrong() {
        for (name, arguments, says) in [
            (
                "delete_everything",
                "{}",
                "there is no tool `delete_everything`",
            ),
            (RUN_COMMAND, r#"{"command": "ls""#, "not a JSON object"),
            (RUN_COMMAND, r#"["ls"]"#, "needs `command`"),
            (RUN_COMMAND, r#"{"command": "  "}"#, "needs `command`"),
            (RUN_COMMAND, r#"{"command": 5}"#, "needs `command`"),
            (
                RUN_COMMAND,
                r#"{"command": "ls", "timeoutMs": 0}"#,
                "from 1 to 25000",
            ),
            (
                RUN_COMMAND,
                r#"{"command": "ls", "timeoutMs": 25001}"#,
                "from 1 to 25000",
            ),
            (
                RUN_COMMAND,
                r#"{"command": "ls", "timeoutMs": "5"}"#,
                "from 1 to 25000",
            ),
        ] {
            let why = command_of(&call(name, arguments)).unwrap_err();
            assert!(why.contains(says), "{arguments}: {why}");
        }
    }

    #[test]
    fn an_answer_runs_at_most_its_share_of_calls() {
        let calls: Vec<ToolCall> = (0..7)
            .map(|i| call(RUN_COMMAND, &format!(r#"{{"command": "echo {i}"}}"#)))
            .chain([call("nope", "{}")])
            .collect();
        let (commands, skipped) = commands(&calls);
        assert_eq!(commands.len(), MAX_RUNS_PER_ANSWER);
        assert_eq!(commands[4].cmd, "echo 4");
        assert_eq!(skipped, 2);
    }

    #[test]
    fn stored_calls_read_back_as_they_were() {
        let calls = [call(RUN_COMMAND, "{}"), call("other", r#"{"a":1}"#)];
        assert_eq!(unflatten(&flatten(&calls)), calls);
        assert_eq!(flatten(&calls).len(), 6);
        assert_eq!(unflatten(&flatten(&calls)[..5]), calls[..1]);
    }

    #[test]
    fn calls_are_sent_back_in_the_openai_shape() {
        let sent = serde_json::to_value(call(RUN_COMMAND, r#"{"command":"ls"}"#)).unwrap();
        assert_eq!(
            sent,
            serde_json::json!({"id": "call_1", "type": "function",
                "function": {"name": "run_command", "arguments": "{\"command\":\"ls\"}"}})
        );
    }
}
