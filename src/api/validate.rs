//! Turns request bodies into typed requests, collecting every field's problem
//! so a caller learns all of them from one 400.

use duet_wire::ExecRequest;
use serde_json::{Map, Value};

use super::error::{ApiError, FieldErrors};
use super::invite::InviteRequest;
use super::limits::{
    EXEC_DEFAULT_TIMEOUT_MS, EXEC_MAX_TIMEOUT_MS, INVITE_DEFAULT_TTL_SECONDS,
    INVITE_MAX_TTL_SECONDS, MAX_CMD_CHARS, MAX_TEXT_CHARS, MAX_USER_ID_CHARS,
};
use super::role::RoomRole;
use super::route;
use super::shapes::{MessageRequest, RUN_COMMAND, START_JOB};
use crate::text::without_controls;

/// `{"text": string, "userId"?: string}`; both are chat text, so terminal
/// control sequences are removed (see [`without_controls`]) and the rest
/// trimmed; `text` must not be blank.
pub fn message_request(body: &[u8]) -> Result<MessageRequest, ApiError> {
    message_fields(&json_object(body)?)
}

/// The fields of a message (see [`message_request`]), from an object read
/// already (an MCP client's `send_message` arguments).
pub fn message_fields(object: &Map<String, Value>) -> Result<MessageRequest, ApiError> {
    let mut errors = FieldErrors::new();
    let text = required_string(object, "text", &mut errors).map(chat_text);
    let text = text
        .as_deref()
        .and_then(|text| check_text("text", text, MAX_TEXT_CHARS, &mut errors));
    let user_id = optional_name(object, "userId", &mut errors);
    match text {
        Some(text) if errors.is_empty() => Ok(MessageRequest {
            text: text.to_owned(),
            user_id,
        }),
        _ => Err(ApiError::Invalid(errors)),
    }
}

/// `{"role": "watcher"|"writer"|"owner", "ttlSeconds"?: integer, "name"?:
/// string}`; the name is chat text, like a `userId`.
pub fn invite_request(body: &[u8]) -> Result<InviteRequest, ApiError> {
    let object = json_object(body)?;
    let mut errors = FieldErrors::new();
    let role = required_string(&object, "role", &mut errors).and_then(|role| {
        let parsed = RoomRole::parse(role);
        if parsed.is_none() {
            let why = "must be one of watcher, writer, owner";
            errors.entry("role").or_default().push(why.into());
        }
        parsed
    });
    let ttl_seconds = optional_integer(
        &object,
        "ttlSeconds",
        INVITE_DEFAULT_TTL_SECONDS,
        INVITE_MAX_TTL_SECONDS,
        &mut errors,
    );
    let name = optional_name(&object, "name", &mut errors);
    match (role, ttl_seconds) {
        (Some(role), Some(ttl_seconds)) if errors.is_empty() => Ok(InviteRequest {
            role,
            ttl_seconds,
            name,
        }),
        _ => Err(ApiError::Invalid(errors)),
    }
}

/// An optional name of someone (`userId`, an invite's `name`): chat text of
/// 1 to [`MAX_USER_ID_CHARS`] characters; null or absent is none.
pub fn optional_name(
    object: &Map<String, Value>,
    field: &'static str,
    errors: &mut FieldErrors,
) -> Option<String> {
    let name = match object.get(field) {
        None | Some(Value::Null) => return None,
        Some(Value::String(name)) => chat_text(name),
        Some(_) => {
            errors
                .entry(field)
                .or_default()
                .push("must be a string".into());
            return None;
        }
    };
    check_text(field, &name, MAX_USER_ID_CHARS, errors).map(str::to_owned)
}

/// Cleans a name for the list of who is on the live feed, as
/// [`optional_name`] would; `None` if nothing is left of it.
pub fn shown_name(name: &str) -> Option<String> {
    let name = chat_text(name);
    let name = crate::text::first_chars(&name, MAX_USER_ID_CHARS);
    (!name.is_empty()).then(|| name.to_owned())
}

/// Text fit for other people's terminals, trimmed.
fn chat_text(text: &str) -> String {
    without_controls(text).trim().to_owned()
}

/// A validated exec body, with who is behind the command, for the audit.
#[derive(Debug, PartialEq, Eq)]
pub struct Exec {
    pub request: ExecRequest,
    /// Who asked: the `userId` given.
    pub user_id: Option<String>,
    /// Who let it run (`decidedBy`) and by what rule (`rule`): what the
    /// DuetAgent says of a command of the agent's; a public exec's are
    /// ignored.
    pub decided_by: Option<String>,
    pub rule: Option<String>,
}

/// `{"cmd": string, "timeoutMs"?: integer, "userId"?: string}`; `cmd` must
/// not be blank.
pub fn exec_request(body: &[u8]) -> Result<Exec, ApiError> {
    let object = json_object(body)?;
    let mut errors = FieldErrors::new();
    let cmd = required_command(&object, &mut errors);
    let timeout_ms = optional_integer(
        &object,
        "timeoutMs",
        EXEC_DEFAULT_TIMEOUT_MS,
        EXEC_MAX_TIMEOUT_MS,
        &mut errors,
    );
    let user_id = optional_name(&object, "userId", &mut errors);
    let (decided_by, rule) = consent(&object);
    match (cmd, timeout_ms) {
        (Some(cmd), Some(timeout_ms)) if errors.is_empty() => Ok(Exec {
            request: ExecRequest {
                cmd: cmd.to_owned(),
                timeout_ms,
            },
            user_id,
            decided_by,
            rule,
        }),
        _ => Err(ApiError::Invalid(errors)),
    }
}

/// The body's `cmd`, a [`command`] (an exec's or a job's); its faults go
/// to `errors`.
fn required_command<'a>(
    object: &'a Map<String, Value>,
    errors: &mut FieldErrors,
) -> Option<&'a str> {
    let cmd = required_string(object, "cmd", errors)?;
    match command(cmd) {
        Ok(()) => Some(cmd),
        Err(why) => {
            errors.entry("cmd").or_default().push(why);
            None
        }
    }
}

/// Who let a command run and by what rule, as the DuetAgent says of one
/// of the agent's or an MCP client's (`room::calls`); only those are read,
/// so they are not checked.
fn consent(object: &Map<String, Value>) -> (Option<String>, Option<String>) {
    let said = |field| object.get(field).and_then(Value::as_str).map(str::to_owned);
    (said("decidedBy"), said("rule"))
}

/// A job to start, as `POST …/jobs` asks it, or the DuetAgent for the
/// agent's or an MCP client's `start_job` (with its consent, as an
/// [`Exec`]'s).
#[derive(Debug, PartialEq, Eq)]
pub struct NewJob {
    pub cmd: String,
    /// A label for people, as a `userId` is written.
    pub name: Option<String>,
    pub user_id: Option<String>,
    pub decided_by: Option<String>,
    pub rule: Option<String>,
}

/// `{"cmd": string, "name"?: string, "userId"?: string}`; `cmd` as an
/// exec's, `name` as a `userId`.
pub fn job_request(body: &[u8]) -> Result<NewJob, ApiError> {
    let object = json_object(body)?;
    let mut errors = FieldErrors::new();
    let cmd = required_command(&object, &mut errors);
    let name = optional_name(&object, "name", &mut errors);
    let user_id = optional_name(&object, "userId", &mut errors);
    let (decided_by, rule) = consent(&object);
    match cmd {
        Some(cmd) if errors.is_empty() => Ok(NewJob {
            cmd: cmd.to_owned(),
            name,
            user_id,
            decided_by,
            rule,
        }),
        _ => Err(ApiError::Invalid(errors)),
    }
}

/// The command and time limit of `run_command`'s arguments, `{command,
/// timeoutMs?}`, whether the room's model or an MCP client called it; or
/// why they are not that (said to the caller, who can correct it).
pub fn run_command(arguments: &Value) -> Result<(String, Option<u64>), String> {
    let cmd = command_in(arguments, "command", RUN_COMMAND)?;
    let timeout_ms = match &arguments["timeoutMs"] {
        Value::Null => None,
        value => Some(
            value
                .as_u64()
                .filter(|ms| (1..=EXEC_MAX_TIMEOUT_MS).contains(ms))
                .ok_or_else(|| {
                    format!("`timeoutMs` must be a whole number from 1 to {EXEC_MAX_TIMEOUT_MS}")
                })?,
        ),
    };
    Ok((cmd, timeout_ms))
}

/// The command and name of `start_job`'s arguments, `{cmd, name?}`; the
/// name is checked where the job starts, as the route's is.
pub fn start_job(arguments: &Value) -> Result<(String, Option<String>), String> {
    let cmd = command_in(arguments, "cmd", START_JOB)?;
    Ok((cmd, arguments["name"].as_str().map(str::to_owned)))
}

/// The job `job_status`'s or `stop_job`'s arguments name, `{jobId}`.
pub fn job_named(arguments: &Value) -> Result<u64, String> {
    let id = arguments["jobId"].as_str().unwrap_or_default();
    route::job_number(id).map_err(|_| "`jobId` must be a job's id, as start_job gave it".into())
}

/// The command in `field` of `tool`'s arguments, trimmed.
fn command_in(arguments: &Value, field: &str, tool: &str) -> Result<String, String> {
    let Some(cmd) = arguments[field].as_str().filter(|c| !c.trim().is_empty()) else {
        return Err(format!("{tool} needs `{field}`, a non-empty string"));
    };
    command(cmd).map_err(|why| format!("`{field}` {why}"))?;
    Ok(cmd.trim().to_owned())
}

/// Checks a shell command, whether a user sent it or the model asked for it.
pub fn command(cmd: &str) -> Result<(), String> {
    if cmd.trim().is_empty() {
        Err("must not be empty".into())
    } else if cmd.chars().count() > MAX_CMD_CHARS {
        Err(format!("must be at most {MAX_CMD_CHARS} characters"))
    } else if cmd.contains('\0') {
        // bash cannot pass a NUL byte to any program.
        Err("must not contain NUL characters".into())
    } else {
        Ok(())
    }
}

/// An optional integer from 1 to `max`; null or absent is `default`.
fn optional_integer(
    object: &Map<String, Value>,
    field: &'static str,
    default: u64,
    max: u64,
    errors: &mut FieldErrors,
) -> Option<u64> {
    match object.get(field) {
        None | Some(Value::Null) => Some(default),
        Some(value) => {
            let fits = value.as_u64().filter(|n| (1..=max).contains(n));
            if fits.is_none() {
                let why = format!("must be an integer from 1 to {max}");
                errors.entry(field).or_default().push(why);
            }
            fits
        }
    }
}

/// Parsed from text, as every JSON the worker reads is: one reader type
/// means one copy of serde_json's parser in the upload.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let text = std::str::from_utf8(body).map_err(|e| ApiError::BadJson(e.to_string()))?;
    match serde_json::from_str(text) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(ApiError::NotAnObject),
        Err(e) => Err(ApiError::BadJson(e.to_string())),
    }
}

pub fn required_string<'a>(
    object: &'a Map<String, Value>,
    field: &'static str,
    errors: &mut FieldErrors,
) -> Option<&'a str> {
    let why = match object.get(field) {
        Some(Value::String(s)) => return Some(s),
        None | Some(Value::Null) => "is required",
        Some(_) => "must be a string",
    };
    errors.entry(field).or_default().push(why.into());
    None
}

fn check_text<'a>(
    field: &'static str,
    text: &'a str,
    max_chars: usize,
    errors: &mut FieldErrors,
) -> Option<&'a str> {
    let why = if text.is_empty() {
        "must not be blank".to_string()
    } else if text.chars().count() > max_chars {
        format!("must be at most {max_chars} characters")
    } else {
        return Some(text);
    };
    errors.entry(field).or_default().push(why);
    None
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub fn details(e: ApiError) -> serde_json::Value {
        assert_eq!(e.status(), 400);
        serde_json::to_value(e.body()).unwrap()["details"].clone()
    }

    #[test]
    fn message_ok_and_trimmed() {
        let m = message_request(br#"{"text": "  hi there \n", "userId": "ana"}"#).unwrap();
        assert_eq!(
            m,
            MessageRequest {
                text: "hi there".into(),
                user_id: Some("ana".into())
            }
        );
        let m = message_request(br#"{"text": "x", "extra": 1}"#).unwrap();
        assert_eq!(m.user_id, None);
    }

    #[test]
    fn chat_text_loses_terminal_controls() {
        let m = message_request(
            br#"{"text": " \u001b]52;c;ZXZpbA==\u0007hi \u001b[2J", "userId": "\u001b[31mana"}"#,
        )
        .unwrap();
        assert_eq!(m.text, "hi");
        assert_eq!(m.user_id.as_deref(), Some("ana"));
        assert_eq!(
            details(message_request(br#"{"text": "\u001b[2J"}"#).unwrap_err())["text"][0],
            "must not be blank"
        );
    }

    #[test]
    fn message_field_errors() {
        assert_eq!(
            details(message_request(br#"{}"#).unwrap_err())["text"][0],
            "is required"
        );
        assert_eq!(
            details(message_request(br#"{"text": "   "}"#).unwrap_err())["text"][0],
            "must not be blank"
        );
        let d = details(message_request(br#"{"text": 5, "userId": 7}"#).unwrap_err());
        assert_eq!(d["text"][0], "must be a string");
        assert_eq!(d["userId"][0], "must be a string");
        let long = format!(r#"{{"text": "{}"}}"#, "é".repeat(MAX_TEXT_CHARS + 1));
        assert!(
            details(message_request(long.as_bytes()).unwrap_err())["text"][0]
                .as_str()
                .unwrap()
                .contains("at most")
        );
        let fits = format!(r#"{{"text": "{}"}}"#, "é".repeat(MAX_TEXT_CHARS));
        assert!(message_request(fits.as_bytes()).is_ok());
    }

    #[test]
    fn bodies_that_are_not_objects() {
        assert!(matches!(
            message_request(b"not json"),
            Err(ApiError::BadJson(_))
        ));
        assert!(matches!(message_request(b""), Err(ApiError::BadJson(_))));
        assert!(matches!(
            message_request(b"[1]"),
            Err(ApiError::NotAnObject)
        ));
        assert!(matches!(
            exec_request(b"\"echo\""),
            Err(ApiError::NotAnObject)
        ));
        assert!(matches!(
            message_request(b"{\"text\": \"\xff\"}"),
            Err(ApiError::BadJson(_))
        ));
    }

    #[test]
    fn invite_requests() {
        let i = invite_request(br#"{"role": "watcher"}"#).unwrap();
        assert_eq!(
            i,
            InviteRequest {
                role: RoomRole::Watcher,
                ttl_seconds: INVITE_DEFAULT_TTL_SECONDS,
                name: None
            }
        );
        let i = invite_request(br#"{"role": "owner", "ttlSeconds": 5, "name": " \u001b[1mbo "}"#)
            .unwrap();
        assert_eq!(
            (i.role, i.ttl_seconds, i.name.as_deref()),
            (RoomRole::Owner, 5, Some("bo"))
        );
        let d = details(
            invite_request(br#"{"role": "admin", "ttlSeconds": 0, "name": ""}"#).unwrap_err(),
        );
        assert_eq!(d["role"][0], "must be one of watcher, writer, owner");
        assert_eq!(d["ttlSeconds"][0], "must be an integer from 1 to 2592000");
        assert_eq!(d["name"][0], "must not be blank");
        assert_eq!(
            details(invite_request(b"{}").unwrap_err())["role"][0],
            "is required"
        );
        let long = format!(r#"{{"role": "writer", "name": "{}"}}"#, "n".repeat(129));
        assert!(details(invite_request(long.as_bytes()).unwrap_err())["name"].is_array());
    }

    #[test]
    fn shown_names_are_cleaned_and_cut() {
        assert_eq!(shown_name(" \u{1b}[31mana ").as_deref(), Some("ana"));
        assert_eq!(shown_name(" \u{1b}[2J "), None);
        assert_eq!(shown_name(&"é".repeat(200)).unwrap().chars().count(), 128);
    }

    #[test]
    fn job_requests() {
        let job =
            job_request(br#"{"cmd": "sleep 1", "name": " \u001b[1mbuild ", "userId": "ana"}"#);
        assert_eq!(
            job.unwrap(),
            NewJob {
                cmd: "sleep 1".into(),
                name: Some("build".into()),
                user_id: Some("ana".into()),
                decided_by: None,
                rule: None,
            }
        );
        assert_eq!(job_request(br#"{"cmd": "x"}"#).unwrap().name, None);
        let d = details(job_request(br#"{"cmd": " ", "name": 5}"#).unwrap_err());
        assert_eq!(d["cmd"][0], "must not be empty");
        assert_eq!(d["name"][0], "must be a string");
        assert_eq!(
            details(job_request(b"{}").unwrap_err())["cmd"][0],
            "is required"
        );
        assert!(matches!(job_request(b"[]"), Err(ApiError::NotAnObject)));
    }

    #[test]
    fn exec_requests() {
        let e = exec_request(br#"{"cmd": "echo hi"}"#).unwrap();
        assert_eq!(
            e,
            Exec {
                request: ExecRequest {
                    cmd: "echo hi".into(),
                    timeout_ms: EXEC_DEFAULT_TIMEOUT_MS
                },
                user_id: None,
                decided_by: None,
                rule: None,
            }
        );
        let e = exec_request(
            br#"{"cmd": "true", "timeoutMs": 50, "userId": "ana", "decidedBy": "bo", "rule": "ls"}"#,
        )
        .unwrap();
        assert_eq!(e.request.timeout_ms, 50);
        assert_eq!(
            (
                e.user_id.as_deref(),
                e.decided_by.as_deref(),
                e.rule.as_deref()
            ),
            (Some("ana"), Some("bo"), Some("ls"))
        );
        assert_eq!(
            details(exec_request(br#"{"cmd": ""}"#).unwrap_err())["cmd"][0],
            "must not be empty"
        );
        assert_eq!(
            details(exec_request(br#"{"cmd": ["ls"]}"#).unwrap_err())["cmd"][0],
            "must be a string"
        );
        assert_eq!(
            details(exec_request(br#"{"cmd": "echo \u0000"}"#).unwrap_err())["cmd"][0],
            "must not contain NUL characters"
        );
        for bad in ["0", "-1", "1.5", "\"9\"", "25001"] {
            let body = format!(r#"{{"cmd": "true", "timeoutMs": {bad}}}"#);
            assert!(
                details(exec_request(body.as_bytes()).unwrap_err())["timeoutMs"].is_array(),
                "{bad}"
            );
        }
    }
}
