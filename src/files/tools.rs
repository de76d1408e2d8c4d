//! The file tools of the agent and of MCP clients, as plain data: what a
//! call asks ([`FileTool::asked`], from the call's arguments, read the same
//! way by the DuetAgent, which judges it, and the Sandbox object, which
//! carries it out), and what it hears back: a file as numbered lines, a
//! directory as one entry a line, an edit applied to one match, and a
//! change shown as a diff for a writer to approve. Every answer is bounded.

use serde_json::Value;

use super::{EDIT_FILE, LIST_FILES, READ_FILE, WRITE_FILE};

/// Lines `read_file` gives by default, and at most.
pub const READ_LINES: usize = 500;
pub const MAX_READ_LINES: usize = 2_000;
/// Characters of a line `read_file` shows; the rest is cut.
pub const LINE_CHARS: usize = 2_000;
/// Characters a file tool answers at most (a read, a listing).
pub const TOOL_CHARS: usize = 16_000;
/// Characters of a change's diff shown for approval.
pub const DIFF_CHARS: usize = 4_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileTool {
    /// From line `offset` (the first is 1), at most `limit` lines.
    Read {
        offset: usize,
        limit: usize,
    },
    List,
    Write {
        content: String,
    },
    Edit {
        old_text: String,
        new_text: String,
    },
}

impl FileTool {
    /// The file tool `name` asks for with `arguments`, and its path; `None`
    /// for a tool that is not a file tool, an error the model can read for
    /// arguments that are not what the tool takes.
    pub fn asked(name: &str, arguments: &Value) -> Option<Result<(Self, String), String>> {
        let text = |field: &str| {
            arguments[field]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{name} needs `{field}`, a string"))
        };
        let lines = |field: &str, default: usize, most: usize| match &arguments[field] {
            Value::Null => Ok(default),
            value => value
                .as_u64()
                .map(|n| n as usize)
                .filter(|n| (1..=most).contains(n))
                .ok_or_else(|| format!("`{field}` must be a whole number from 1 to {most}")),
        };
        let tool = match name {
            READ_FILE => lines("offset", 1, usize::MAX).and_then(|offset| {
                let limit = lines("limit", READ_LINES, MAX_READ_LINES)?;
                Ok(Self::Read { offset, limit })
            }),
            LIST_FILES => Ok(Self::List),
            WRITE_FILE => text("content").map(|content| Self::Write { content }),
            EDIT_FILE => text("old_text")
                .and_then(|old| match old.is_empty() {
                    true => Err("`old_text` must not be empty".to_owned()),
                    false => Ok(old),
                })
                .and_then(|old_text| {
                    let new_text = text("new_text")?;
                    Ok(Self::Edit { old_text, new_text })
                }),
            _ => return None,
        };
        // The workspace itself is listed when no path is given.
        let path = match (&arguments["path"], &tool) {
            (Value::Null, Ok(Self::List)) => Ok(String::new()),
            _ => text("path"),
        };
        Some(tool.and_then(|tool| Ok((tool, path?))))
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Read { .. } => READ_FILE,
            Self::List => LIST_FILES,
            Self::Write { .. } => WRITE_FILE,
            Self::Edit { .. } => EDIT_FILE,
        }
    }

    /// Whether it changes the workspace, so that the room's policy judges it.
    pub fn changes(&self) -> bool {
        matches!(self, Self::Write { .. } | Self::Edit { .. })
    }

    /// Its arguments again, as the Sandbox object reads them.
    pub fn arguments(&self, path: &str) -> Value {
        let mut arguments = serde_json::json!({ "tool": self.name(), "path": path });
        match self {
            Self::Read { offset, limit } => {
                arguments["offset"] = (*offset).into();
                arguments["limit"] = (*limit).into();
            }
            Self::List => {}
            Self::Write { content } => arguments["content"] = content.as_str().into(),
            Self::Edit { old_text, new_text } => {
                arguments["old_text"] = old_text.as_str().into();
                arguments["new_text"] = new_text.as_str().into();
            }
        }
        arguments
    }
}

/// A path as the room's rules see it: `/`-separated parts without empty
/// ones and `.`, each `..` taking the part before it (as sandboxd reads a
/// path; one that would leave the workspace is kept as it is, for sandboxd
/// to refuse).
pub fn normalized(path: &str) -> String {
    let mut parts: Vec<&str> = vec![];
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.pop().is_some() => {}
            ".." => return path.to_owned(),
            part => parts.push(part),
        }
    }
    parts.join("/")
}

/// A file's bytes as text; `None` for a binary file: not UTF-8, or with a
/// NUL in it.
pub fn text(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes)
        .ok()
        .filter(|t| !t.contains('\0'))
}

/// A file's bytes as `read_file` answers them: from line `offset`, at most
/// `limit` lines, each numbered and cut at [`LINE_CHARS`], the whole at
/// most [`TOOL_CHARS`]; a note says where to read on. A file that is not
/// UTF-8 text is said to be binary.
pub fn numbered(path: &str, bytes: &[u8], offset: usize, limit: usize) -> String {
    let Some(text) = text(bytes) else {
        return format!(
            "{path} is a binary file of {} bytes; not shown",
            bytes.len()
        );
    };
    let total = text.lines().count();
    if total == 0 {
        return format!("{path} is empty");
    }
    let mut shown = String::new();
    let mut last = offset - 1;
    for (at, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        let line = crate::text::first_chars(line, LINE_CHARS);
        let numbered = format!("{:>6}\t{line}\n", at + 1);
        if shown.len() + numbered.len() > TOOL_CHARS {
            break;
        }
        shown.push_str(&numbered);
        last = at + 1;
    }
    if last < offset {
        return format!("{path} has {total} lines; there is no line {offset}");
    }
    if last < total {
        shown += &format!(
            "[lines {offset}-{last} of {total}; read on with offset {}]",
            last + 1
        );
    }
    shown
}

/// A directory as `list_files` answers it, from sandboxd's listing (read
/// through a `Value`, as `changed_of`): an entry a line, a directory's
/// name ending in `/`, a file's with its size.
pub fn listing(list: &Value) -> String {
    let shown = list["path"]
        .as_str()
        .filter(|p| !p.is_empty())
        .unwrap_or("the workspace");
    let entries = list["entries"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut said = format!("{shown}: {} entries\n", entries.len());
    for entry in entries {
        let name = entry["name"].as_str().unwrap_or_default();
        let line = match entry["type"].as_str() {
            Some("dir") => format!("{name}/\n"),
            Some("file") => format!("{name} ({} bytes)\n", entry["size"]),
            Some("symlink") => format!("{name} (symlink)\n"),
            _ => format!("{name} (not a file)\n"),
        };
        if said.len() + line.len() > TOOL_CHARS {
            said += "[more entries not shown]";
            return said;
        }
        said += &line;
    }
    if list["truncated"] == true {
        said += "[more entries not shown]";
    }
    said
}

/// `text` with `old` replaced by `new`, when `old` is found exactly once.
pub fn replace_once(path: &str, text: &str, old: &str, new: &str) -> Result<String, String> {
    match text.matches(old).count() {
        1 => Ok(text.replacen(old, new, 1)),
        0 => Err(format!(
            "`old_text` was not found in {path}; nothing was changed"
        )),
        n => Err(format!(
            "`old_text` was found {n} times in {path}; include more of the lines around it so \
             that it matches once; nothing was changed"
        )),
    }
}

/// The change from `old` to `new` as one unified diff hunk (the lines
/// both share at the start and the end left out), at most [`DIFF_CHARS`].
pub fn diff(path: &str, old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (
        old.split_inclusive('\n').collect(),
        new.split_inclusive('\n').collect(),
    );
    let start = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let end = a[start..]
        .iter()
        .rev()
        .zip(b[start..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (gone, came) = (&a[start..a.len() - end], &b[start..b.len() - end]);
    let mut said = format!(
        "--- {path}\n+++ {path}\n@@ -{},{} +{},{} @@\n",
        start + 1,
        gone.len(),
        start + 1,
        came.len()
    );
    for (sign, lines) in [('-', gone), ('+', came)] {
        for line in lines {
            said.push(sign);
            said.push_str(line);
            if !line.ends_with('\n') {
                said.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
    match said.char_indices().nth(DIFF_CHARS) {
        Some((cut, _)) => format!("{}\n[diff cut at {DIFF_CHARS} characters]", &said[..cut]),
        None => said,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use duet_wire::file::{Entry, EntryKind, FileList};
    use serde_json::json;

    fn asked(name: &str, arguments: Value) -> Result<(FileTool, String), String> {
        FileTool::asked(name, &arguments).expect("a file tool")
    }

    #[test]
    fn calls_are_read_from_their_arguments_and_written_back_alike() {
        let edit = asked(
            EDIT_FILE,
            json!({"path": "a.rs", "old_text": "x", "new_text": ""}),
        );
        let (tool, path) = edit.unwrap();
        assert_eq!(
            FileTool::asked(EDIT_FILE, &tool.arguments(&path)),
            Some(Ok((tool.clone(), path)))
        );
        assert!(tool.changes());
        let read = asked(READ_FILE, json!({"path": "a.rs"})).unwrap();
        assert_eq!(
            read.0,
            FileTool::Read {
                offset: 1,
                limit: READ_LINES
            }
        );
        assert!(!read.0.changes());
        assert_eq!(
            asked(LIST_FILES, json!({})).unwrap(),
            (FileTool::List, String::new())
        );
        assert_eq!(FileTool::asked("run_command", &json!({})), None);
        for (name, arguments, says) in [
            (READ_FILE, json!({}), "read_file needs `path`"),
            (
                READ_FILE,
                json!({"path": "a", "limit": 0}),
                "from 1 to 2000",
            ),
            (WRITE_FILE, json!({"path": "a"}), "needs `content`"),
            (
                EDIT_FILE,
                json!({"path": "a", "old_text": "", "new_text": "b"}),
                "must not be empty",
            ),
            (
                EDIT_FILE,
                json!({"path": "a", "old_text": "a"}),
                "needs `new_text`",
            ),
        ] {
            let why = asked(name, arguments).unwrap_err();
            assert!(why.contains(says), "{why}");
        }
    }

    #[test]
    fn paths_are_judged_as_sandboxd_reads_them() {
        assert_eq!(normalized("./src//a/../b.rs"), "src/b.rs");
        assert_eq!(normalized("src/"), "src");
        assert_eq!(normalized("../x"), "../x");
        assert_eq!(normalized(""), "");
    }

    #[test]
    fn a_file_is_read_as_numbered_lines_from_an_offset() {
        let text = b"one\ntwo\nthree\n";
        assert_eq!(
            numbered("f", text, 1, 500),
            "     1\tone\n     2\ttwo\n     3\tthree\n"
        );
        assert_eq!(
            numbered("f", text, 2, 1),
            "     2\ttwo\n[lines 2-2 of 3; read on with offset 3]"
        );
        assert_eq!(
            numbered("f", text, 9, 1),
            "f has 3 lines; there is no line 9"
        );
        assert_eq!(numbered("f", b"", 1, 5), "f is empty");
        assert_eq!(
            numbered("f", b"a\0b", 1, 5),
            "f is a binary file of 3 bytes; not shown"
        );
        assert!(numbered("f", &[0xff, 0xfe], 1, 5).contains("binary"));
        let long = "x".repeat(3_000);
        let read = numbered("f", long.as_bytes(), 1, 5);
        assert_eq!(read.len(), 6 + 1 + LINE_CHARS + 1);
        let many = "line\n".repeat(10_000);
        let read = numbered("f", many.as_bytes(), 1, MAX_READ_LINES);
        assert!(read.len() <= TOOL_CHARS + 60, "{}", read.len());
        assert!(
            read.ends_with("of 10000; read on with offset 1334]"),
            "{}",
            &read[read.len() - 60..]
        );
    }

    #[test]
    fn a_directory_is_listed_an_entry_a_line() {
        let entries = [
            ("a.rs", EntryKind::File, 12),
            ("src", EntryKind::Dir, 4096),
            ("l", EntryKind::Symlink, 3),
        ];
        let list = FileList {
            path: String::new(),
            entries: entries
                .map(|(name, kind, size)| Entry {
                    name: name.into(),
                    kind,
                    size,
                    mtime: String::new(),
                })
                .into(),
            truncated: true,
        };
        assert_eq!(
            listing(&serde_json::to_value(&list).unwrap()),
            "the workspace: 3 entries\na.rs (12 bytes)\nsrc/\nl (symlink)\n[more entries not shown]"
        );
    }

    #[test]
    fn an_edit_replaces_exactly_one_match() {
        assert_eq!(replace_once("f", "a b a", "b", "c"), Ok("a c a".into()));
        let none = replace_once("f", "a b a", "z", "c").unwrap_err();
        assert!(none.contains("not found in f"), "{none}");
        let two = replace_once("f", "a b a", "a", "c").unwrap_err();
        assert!(two.contains("found 2 times in f"), "{two}");
    }

    #[test]
    fn a_change_is_shown_as_one_hunk() {
        assert_eq!(
            diff("f", "a\nb\nc\n", "a\nB\nc\n"),
            "--- f\n+++ f\n@@ -2,1 +2,1 @@\n-b\n+B\n"
        );
        assert_eq!(
            diff("f", "", "new\n"),
            "--- f\n+++ f\n@@ -1,0 +1,1 @@\n+new\n"
        );
        assert_eq!(
            diff("f", "x", "y"),
            "--- f\n+++ f\n@@ -1,1 +1,1 @@\n-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file\n"
        );
        let big = diff("f", "", &"line\n".repeat(5_000));
        assert!(big.ends_with("[diff cut at 4000 characters]"));
    }
}
