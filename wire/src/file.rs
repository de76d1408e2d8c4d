//! Files: the workspace's files read, written and deleted by path, without
//! the shell. A path is relative to the sandbox's workspace (`path=` in the
//! query, percent-encoded); sandboxd resolves it beneath the workspace, so
//! that neither `..` nor a symlink, in any position and at any moment, leads
//! outside it.
//!
//! ```text
//! GET    /v1/sandboxes/{name}/files?path=P             a directory: FileList
//!                                                      a file: its bytes (Content-Length;
//!                                                      `Range: bytes=a-b` -> 206 with that part)
//! PUT    /v1/sandboxes/{name}/files?path=P             the file's bytes -> FileChanged (size)
//! DELETE /v1/sandboxes/{name}/files?path=P[&recursive=true]  -> FileChanged (deleted)
//! ```
//!
//! Refusals, each `{"error": "..."}`: 400 for a path that is absolute, holds
//! NUL, leaves the workspace by `..` or is longer than [`MAX_PATH_BYTES`];
//! 403 for one that leads outside through a symlink; 404 for a missing one;
//! 409 for a directory deleted without `recursive` that is not empty, or a
//! file written where a directory is; 413 for a body or a file read whole
//! over [`MAX_FILE_BYTES`] (a range of a larger file is read in parts);
//! 416 (with `Content-Range: bytes */size`) for a range starting past the
//! end; 408 for a body that is not whole within a minute.

use serde::{Deserialize, Serialize};

/// The largest file written, or read whole, in one request.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// The most entries a listing holds; `truncated` says there were more.
pub const MAX_LIST_ENTRIES: usize = 1_000;
/// The longest path taken (Linux's `PATH_MAX`, its terminating NUL included).
pub const MAX_PATH_BYTES: usize = 4_096;
/// The query parameters.
pub const PATH: &str = "path";
pub const RECURSIVE: &str = "recursive";

/// The query that names `path`: `path=` and the path percent-encoded,
/// every byte but the unreserved ones and `/`.
pub fn path_query(path: &str) -> String {
    let mut query = format!("{PATH}=");
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                query.push(b as char)
            }
            b => query.push_str(&format!("%{b:02X}")),
        }
    }
    query
}

/// What a directory holds, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileList {
    /// The directory, as asked for, normalized (no `.`, no trailing `/`;
    /// the workspace itself is "").
    pub path: String,
    pub entries: Vec<Entry>,
    /// More than [`MAX_LIST_ENTRIES`] were there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// One entry of a directory, as `lstat` sees it (a symlink is not followed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: EntryKind,
    pub size: u64,
    /// Last modified: UTC, ISO 8601 with milliseconds.
    pub mtime: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// A socket, a device, a pipe.
    Other,
}

/// What a write or a delete did: the path, normalized, and the size
/// written, or that it was deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChanged {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_named_in_the_query_percent_encoded() {
        assert_eq!(path_query("src/main.rs"), "path=src/main.rs");
        assert_eq!(path_query("a b+c&d=é%"), "path=a%20b%2Bc%26d%3D%C3%A9%25");
        assert_eq!(path_query(""), "path=");
    }
}
