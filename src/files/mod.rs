//! The workspace's files, read, written and deleted by path beside the
//! shell. sandboxd keeps every path inside the workspace and answers the
//! bytes (`duet_wire::file`); the Sandbox object relays each request, bounds
//! it, and shows every change to the room: a `file` event on the feed and
//! an entry in the audit. This is the pure core: what a change is, and how
//! the room names it.

use duet_wire::file::FileChanged;
use serde::Serialize;
use serde_json::Value;

pub mod tools;

/// What became of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Written,
    Deleted,
}

impl Change {
    pub fn of(changed: &FileChanged) -> Self {
        match changed.deleted {
            true => Self::Deleted,
            false => Self::Written,
        }
    }

    /// The tool that makes it, as the audit names a change whatever its
    /// source (the route, the agent, an MCP client).
    pub fn tool(self) -> &'static str {
        match self {
            Self::Written => WRITE_FILE,
            Self::Deleted => DELETE_FILE,
        }
    }
}

/// sandboxd's answer to a write or a delete, read through a `Value`, whose
/// reader the upload has anyway (a derived one would add to it).
pub fn changed_of(answer: &Value) -> Option<FileChanged> {
    Some(FileChanged {
        path: answer["path"].as_str()?.to_owned(),
        size: answer["size"].as_u64(),
        deleted: answer["deleted"] == true,
    })
}

/// The file tools: the model's, an MCP client's, and the audit's names.
pub const READ_FILE: &str = "read_file";
pub const LIST_FILES: &str = "list_files";
pub const WRITE_FILE: &str = "write_file";
pub const EDIT_FILE: &str = "edit_file";
pub const DELETE_FILE: &str = "delete_file";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_read_from_sandboxd_s_answer() {
        let answer = |json| changed_of(&serde_json::from_str(json).unwrap()).unwrap();
        let written = answer(r#"{"path":"a/b.txt","size":3}"#);
        assert_eq!(Change::of(&written), Change::Written);
        assert_eq!(written.size, Some(3));
        let deleted = answer(r#"{"path":"a","deleted":true}"#);
        assert_eq!(Change::of(&deleted), Change::Deleted);
        assert_eq!(Change::of(&deleted).tool(), "delete_file");
        assert_eq!(
            serde_json::to_string(&Change::Written).unwrap(),
            r#""written""#
        );
        assert_eq!(changed_of(&serde_json::json!({"size": 1})), None);
    }
}
