//! The tools a room offers an MCP client, written as the JSON `tools/list`
//! answers (a derived writer per type would cost the upload more than the
//! text), the role each needs, and what a call gives back.
//!
//! A watcher's token lists only the read-only tools and is refused the
//! others (a tool error, which a model reads, rather than a protocol one).
//! The file tools are the agent's (`files::tools`): a write or an edit is
//! judged by the room's file rules, a read is not.

use crate::api::shapes::{Source, JOB_STATUS, RUN_COMMAND, START_JOB, STOP_JOB};
use serde_json::Value;

use crate::api::role::RoomRole;
use crate::files::{EDIT_FILE, LIST_FILES, READ_FILE, WRITE_FILE};
use crate::terminal::WRITE_TERMINAL;

/// The tools, in the order listed. Their limits are checked against
/// `api::limits` by a test.
pub const DEFINITIONS: &str = r#"[
{"name":"run_command","title":"Run a command in the room's shell","description":"Run a shell command in the room's shared Linux sandbox (bash; files, the working directory and variables persist between commands) and get its exit code, stdout and stderr. Everyone in the room sees the command and its output live. The room's policy applies as to its own agent: a deny rule refuses it, and in ask mode it waits (at most 30 s) for a writer in the room to approve it. Each output is cut at 1 MiB.","inputSchema":{"type":"object","properties":{"command":{"type":"string","description":"The command, exactly as it would be typed in bash (at most 8000 characters)."},"timeoutMs":{"type":"integer","minimum":1,"maximum":25000,"description":"How long the command may run, in milliseconds (default 20000, at most 25000); it is stopped then, with exit code 124."}},"required":["command"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"exitCode":{"type":"integer"},"stdout":{"type":"string"},"stderr":{"type":"string"},"truncated":{"type":"boolean","description":"An output was cut at 1 MiB."},"timedOut":{"type":"boolean","description":"The command was stopped at its time limit."}},"required":["exitCode","stdout","stderr","truncated","timedOut"]},"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true}},
{"name":"start_job","title":"Start a job","description":"Start a command as a background job in the room's sandbox, for minutes or hours; answers at once. Use it for anything that may take longer than a command's 25 s (installs, builds, test suites, servers), and check on it with job_status. The room's policy applies as to run_command.","inputSchema":{"type":"object","properties":{"cmd":{"type":"string","description":"The command, exactly as it would be typed in bash (at most 8000 characters)."},"name":{"type":"string","description":"A short label for people."}},"required":["cmd"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"job":{"type":"object"}},"required":["job"]},"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true}},
{"name":"job_status","title":"A job's status","description":"A job of the room: its state (running, exited, stopped or lost), its exit code once it ended, and the newest 64 KiB of its output.","inputSchema":{"type":"object","properties":{"jobId":{"type":"string","description":"The job's id, as start_job gave it."}},"required":["jobId"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"job":{"type":"object"}},"required":["job"]},"annotations":{"readOnlyHint":true,"openWorldHint":false}},
{"name":"stop_job","title":"Stop a job","description":"Stop a running job (SIGTERM, then SIGKILL 5 s later); answers it once it ended.","inputSchema":{"type":"object","properties":{"jobId":{"type":"string","description":"The job's id, as start_job gave it."}},"required":["jobId"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"job":{"type":"object"}},"required":["job"]},"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":true,"openWorldHint":false}},
{"name":"read_file","title":"Read a file","description":"Read a text file of the room's workspace as numbered lines (the path relative to the workspace): at most 2000 lines a call (500 unless limit says), each cut at 2000 characters, 16000 characters in all; offset reads on. A binary file is said to be binary.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer","minimum":1,"description":"The first line to read (the first is 1)."},"limit":{"type":"integer","minimum":1,"maximum":2000,"description":"How many lines to read."}},"required":["path"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path","text"]},"annotations":{"readOnlyHint":true,"openWorldHint":false}},
{"name":"list_files","title":"List a directory","description":"List a directory of the room's workspace (the path relative to it; the workspace itself without one): an entry a line, directories ending in /, files with their size; at most 1000 entries.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false},"outputSchema":{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path","text"]},"annotations":{"readOnlyHint":true,"openWorldHint":false}},
{"name":"write_file","title":"Write a file","description":"Write a file of the room's workspace whole: created with its directories, or replaced at once. Everyone in the room sees the change. The room's policy applies as to run_command: file rules (write_file PATH) refuse or allow it, and in ask mode a writer approves it, seeing the diff. To change part of a file, use edit_file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string","description":"The file's whole new text."}},"required":["path","content"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path","text"]},"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":true,"openWorldHint":false}},
{"name":"edit_file","title":"Edit a file","description":"Change a text file of the room's workspace: the one place where old_text occurs becomes new_text. old_text must match the file exactly and once (a tool error says how many times it matched otherwise); include the lines around it to make it unique. The room's policy applies as to write_file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string"},"new_text":{"type":"string"}},"required":["path","old_text","new_text"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path","text"]},"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":false}},
{"name":"read_terminal","title":"Read the shared terminal","description":"The room's shared terminal as the people in the room see it now: its visible screen as plain text, a line each, and its size. People type into it from the page; what runs there (an editor, a REPL, a test watcher) shows here as drawn.","inputSchema":{"type":"object","additionalProperties":false},"outputSchema":{"type":"object","properties":{"cols":{"type":"integer"},"rows":{"type":"integer"},"text":{"type":"string"}},"required":["cols","rows","text"]},"annotations":{"readOnlyHint":true,"openWorldHint":false}},
{"name":"write_terminal","title":"Type into the shared terminal","description":"Type into the room's shared terminal, as a person at the keyboard would (\\r is Enter, \\u0003 Ctrl-C), where everyone sees it; answers at once, before the shell does anything: read it back with read_terminal. The room's policy judges what is typed as a command: a deny rule refuses it, and in ask mode it waits for a writer.","inputSchema":{"type":"object","properties":{"data":{"type":"string","description":"The keys to type (at most 16384 bytes)."}},"required":["data"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"bytes":{"type":"integer"},"echo":{"type":"boolean","description":"Whether the terminal echoed it (false at a password prompt)."}},"required":["bytes","echo"]},"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true}},
{"name":"read_history","title":"Read the room's chat","description":"Read the room's stored chat history, oldest first (the last 20 messages): what the people in the room and the room's own agent said.","inputSchema":{"type":"object","additionalProperties":false},"outputSchema":{"type":"object","properties":{"messages":{"type":"array","items":{"type":"object","properties":{"role":{"type":"string","enum":["user","agent"]},"userId":{"type":"string"},"text":{"type":"string"},"ts":{"type":"integer","description":"Milliseconds since the Unix epoch."}},"required":["role","text","ts"]}}},"required":["messages"]},"annotations":{"readOnlyHint":true,"openWorldHint":false}},
{"name":"send_message","title":"Send a message to the room","description":"Send a message to the room's chat, where everyone in the room sees it. With ask true (the default) it also asks the room's own agent, which may run commands in the room's shell; the call then answers the agent's reply, and the message and reply are stored in the room's history. With ask false it only shows the message to those watching the room live; it is not stored, as the history holds exchanges with the room's agent.","inputSchema":{"type":"object","properties":{"text":{"type":"string","description":"The message (at most 8000 characters)."},"ask":{"type":"boolean","default":true,"description":"Whether the room's agent answers it."}},"required":["text"],"additionalProperties":false},"annotations":{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":true}}
]"#;

/// A tool of the room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    RunCommand,
    StartJob,
    JobStatus,
    StopJob,
    ReadFile,
    ListFiles,
    WriteFile,
    EditFile,
    ReadTerminal,
    WriteTerminal,
    ReadHistory,
    SendMessage,
}

impl Tool {
    /// The tool a command from `source` came by, as the audit names it:
    /// `run_command` for an MCP client's, none for the others.
    pub fn of_command(source: Source) -> Option<&'static str> {
        (source == Source::Mcp).then_some(Self::RunCommand.name())
    }

    pub const ALL: [Self; 12] = [
        Self::RunCommand,
        Self::StartJob,
        Self::JobStatus,
        Self::StopJob,
        Self::ReadFile,
        Self::ListFiles,
        Self::WriteFile,
        Self::EditFile,
        Self::ReadTerminal,
        Self::WriteTerminal,
        Self::ReadHistory,
        Self::SendMessage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::RunCommand => RUN_COMMAND,
            Self::StartJob => START_JOB,
            Self::JobStatus => JOB_STATUS,
            Self::StopJob => STOP_JOB,
            Self::ReadFile => READ_FILE,
            Self::ListFiles => LIST_FILES,
            Self::WriteFile => WRITE_FILE,
            Self::EditFile => EDIT_FILE,
            Self::ReadTerminal => "read_terminal",
            Self::WriteTerminal => WRITE_TERMINAL,
            Self::ReadHistory => "read_history",
            Self::SendMessage => "send_message",
        }
    }

    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }

    /// The role a call needs: what the routes doing the same need
    /// (`access::roles`).
    pub fn needed(self) -> RoomRole {
        match self {
            Self::ReadHistory
            | Self::JobStatus
            | Self::ReadFile
            | Self::ListFiles
            | Self::ReadTerminal => RoomRole::Watcher,
            _ => RoomRole::Writer,
        }
    }
}

/// The tools `role` may call, as `tools/list` answers them.
pub fn listed(role: RoomRole) -> Vec<Value> {
    let all: Value = serde_json::from_str(DEFINITIONS).expect("the tools are JSON");
    let all = all.as_array().cloned().unwrap_or_default();
    all.into_iter()
        .filter(|tool| {
            let name = tool["name"].as_str().unwrap_or_default();
            Tool::named(name).is_some_and(|tool| tool.needed() <= role)
        })
        .collect()
}

/// What a tool call gives back: its result, or a tool error the caller's
/// model reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Structured content as the JSON text of an object (written by the
    /// serializers the routes use already, or sandboxd's result of a
    /// command, as it wrote it), also given as text for clients that read
    /// only text.
    Done(String),
    Failed(String),
}

impl Output {
    /// The `CallToolResult`, written: a result's JSON text goes in as it
    /// is, as `structuredContent`, and escaped, as the text content.
    pub fn to_result(&self) -> String {
        let text = |text| serde_json::to_string(text).unwrap_or_default();
        match self {
            Self::Done(json) => format!(
                r#"{{"content":[{{"type":"text","text":{}}}],"isError":false,"structuredContent":{json}}}"#,
                text(json)
            ),
            Self::Failed(why) => format!(
                r#"{{"content":[{{"type":"text","text":{}}}],"isError":true}}"#,
                text(why)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::limits::{
        EXEC_DEFAULT_TIMEOUT_MS, EXEC_MAX_TIMEOUT_MS, HISTORY_LIMIT, MAX_CMD_CHARS, MAX_TEXT_CHARS,
        MCP_APPROVAL_WAIT_MS,
    };

    fn tool(name: &str) -> Value {
        listed(RoomRole::Owner)
            .into_iter()
            .find(|t| t["name"] == name)
            .unwrap()
    }

    #[test]
    fn every_tool_is_defined_once_in_order_and_read_only_means_watcher() {
        let names: Vec<Value> = listed(RoomRole::Owner)
            .iter()
            .map(|t| t["name"].clone())
            .collect();
        let all: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names, all);
        for t in Tool::ALL {
            let definition = tool(t.name());
            let read_only = definition["annotations"]["readOnlyHint"] == true;
            assert_eq!(read_only, t.needed() == RoomRole::Watcher, "{t:?}");
            assert_eq!(definition["inputSchema"]["type"], "object");
            assert!(definition["description"].as_str().unwrap().len() > 40);
        }
    }

    #[test]
    fn a_watcher_lists_only_read_only_tools() {
        let names: Vec<Value> = listed(RoomRole::Watcher)
            .iter()
            .map(|t| t["name"].clone())
            .collect();
        assert_eq!(
            names,
            [
                "job_status",
                "read_file",
                "list_files",
                "read_terminal",
                "read_history"
            ]
        );
        assert_eq!(listed(RoomRole::Writer).len(), Tool::ALL.len());
    }

    #[test]
    fn the_definitions_state_the_limits_kept() {
        let run = tool("run_command");
        let timeout = &run["inputSchema"]["properties"]["timeoutMs"];
        assert_eq!(timeout["maximum"], EXEC_MAX_TIMEOUT_MS);
        let said = timeout["description"].as_str().unwrap();
        assert!(said.contains(&format!("default {EXEC_DEFAULT_TIMEOUT_MS}")));
        let wait = format!("at most {} s", MCP_APPROVAL_WAIT_MS / 1000);
        assert!(run["description"].as_str().unwrap().contains(&wait));
        let command = run["inputSchema"]["properties"]["command"]["description"].clone();
        assert!(command
            .as_str()
            .unwrap()
            .contains(&MAX_CMD_CHARS.to_string()));
        let history = tool("read_history")["description"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(history.contains(&format!("last {HISTORY_LIMIT} messages")));
        let text = tool("send_message")["inputSchema"]["properties"]["text"]["description"].clone();
        assert!(text.as_str().unwrap().contains(&MAX_TEXT_CHARS.to_string()));
    }

    #[test]
    fn results_carry_their_json_as_text_and_errors_are_flagged() {
        let read = |output: Output| -> Value { serde_json::from_str(&output.to_result()).unwrap() };
        let done = read(Output::Done(r#"{"exitCode":0}"#.into()));
        assert_eq!(done["content"][0]["text"], r#"{"exitCode":0}"#);
        assert_eq!(done["structuredContent"]["exitCode"], 0);
        assert_eq!(done["isError"], false);
        let failed = read(Output::Failed("denied by bo".into()));
        assert_eq!(failed["isError"], true);
        assert_eq!(failed["content"][0]["text"], "denied by bo");
        assert!(failed.get("structuredContent").is_none());
    }
}
