//! The model's input as both backends take it (OpenAI's chat shape): the
//! turns of a chat, the tool calls a model's turn carries, and the tools
//! offered. What goes into them is the exchange's (`exchange::context`).

use serde::Serialize;

/// One turn of an OpenAI-style chat, the shape both backends accept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage<'a> {
    pub role: &'static str,
    /// `None` (sent as null) only for a model's turn of tool calls alone.
    pub content: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub tool_calls: &'a [ToolCall],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<&'a str>,
}

impl<'a> ChatMessage<'a> {
    pub fn text(role: &'static str, content: &'a str) -> Self {
        Self {
            role,
            content: Some(content),
            tool_calls: &[],
            tool_call_id: None,
        }
    }
}

/// The tools, as the model's input carries them (`tools`; `exchange::tools`
/// reads their calls). Their limits are checked against `api::limits` by a
/// test.
pub const DEFINITIONS: &str = r#"[{"type":"function","function":{"name":"run_command","description":"Run a shell command in the room's Linux sandbox (bash; files and the working directory persist between commands) and get its exit code, stdout and stderr. Everyone in the room sees the command and its output. At most 5 commands per answer.","parameters":{"type":"object","properties":{"command":{"type":"string","description":"The command, exactly as it would be typed in bash."},"timeoutMs":{"type":"integer","minimum":1,"maximum":25000,"description":"How long the command may run, in milliseconds (at most 25000; the room's time budget may allow less)."}},"required":["command"]}}},{"type":"function","function":{"name":"start_job","description":"Start a command as a background job in the room's sandbox; answers at once with its id. Use it for anything that may take longer than a few seconds (installs, builds, test suites, servers).","parameters":{"type":"object","properties":{"cmd":{"type":"string","description":"The command, exactly as it would be typed in bash."},"name":{"type":"string","description":"A short label for people."}},"required":["cmd"]}}},{"type":"function","function":{"name":"job_status","description":"A job's state (running, exited, stopped or lost), its exit code once it ended, and the last 2000 bytes of its output.","parameters":{"type":"object","properties":{"jobId":{"type":"string","description":"The job's id, as start_job gave it."}},"required":["jobId"]}}},{"type":"function","function":{"name":"stop_job","description":"Stop a running job and get its state.","parameters":{"type":"object","properties":{"jobId":{"type":"string","description":"The job's id, as start_job gave it."}},"required":["jobId"]}}},{"type":"function","function":{"name":"read_file","description":"Read a text file of the room's workspace as numbered lines (at most 2000 a call, 500 unless limit says; offset reads on).","parameters":{"type":"object","properties":{"path":{"type":"string","description":"Relative to the workspace."},"offset":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1,"maximum":2000}},"required":["path"]}}},{"type":"function","function":{"name":"list_files","description":"List a directory of the room's workspace: an entry a line, directories ending in /.","parameters":{"type":"object","properties":{"path":{"type":"string","description":"Relative to the workspace; the workspace itself when left out."}}}}},{"type":"function","function":{"name":"write_file","description":"Write a file of the room's workspace whole (created with its directories, or replaced). To change part of a file, use edit_file.","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}},{"type":"function","function":{"name":"edit_file","description":"Change a text file: the one place where old_text occurs becomes new_text. old_text must match exactly once; include the lines around it to make it unique.","parameters":{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string"},"new_text":{"type":"string"}},"required":["path","old_text","new_text"]}}}]"#;

/// One call of a tool, as the model wrote it, and as it is sent back in
/// the model's own turn. Stored (with a paused exchange) as its three
/// strings (`exchange::tools::flatten`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCall {
    pub id: String,
    /// Functions are the only kind.
    #[serde(rename = "type")]
    kind: &'static str,
    pub function: Function,
}

/// The function called, and its arguments as the JSON text the model wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Function {
    pub name: String,
    pub arguments: String,
}

impl ToolCall {
    pub fn new(id: String, name: String, arguments: String) -> Self {
        Self {
            id,
            kind: "function",
            function: Function { name, arguments },
        }
    }
}
