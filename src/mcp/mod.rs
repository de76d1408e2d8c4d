//! Each room is an MCP server: `POST /api/rooms/{roomId}/mcp` speaks the
//! Model Context Protocol's Streamable HTTP transport, so any coding agent
//! that speaks it (Claude Code, Codex, Cursor, …) joins the room's shell and
//! chat under the room's roles and rules. This is the protocol as plain
//! data, tested natively: reading a POST's messages, answering what the
//! protocol answers itself, and handing the tool calls to the room's
//! DuetAgent, which carries them out.
//!
//! Stateless in both eras (see [`version`]): no session is minted, none is
//! read, and every answer is one JSON body (no event stream: nothing is
//! sent before a call's result). GET and DELETE are 405s, at the route.

pub mod rpc;
pub mod tools;
pub mod version;

use serde_json::{Map, Value};

use crate::api::limits::MAX_MCP_CALLS;
use crate::api::role::RoomRole;
use rpc::{error, object, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use tools::Tool;
use version::{META_CAPABILITIES, META_CLIENT, META_SERVER, META_VERSION, MODERN};

/// How long a client may keep `tools/list` and `server/discover` (a room's
/// tools change only with the worker); the list is per token (`private`).
const LIST_TTL_MS: u64 = 300_000;

/// What the room's instructions tell a client's model.
const INSTRUCTIONS: &str = "A Duet room: a shared Linux shell and chat where people, the room's \
own agent and other agents pair. Commands run in the room's one shell, seen live by everyone \
there, under the room's roles and approval rules.";

/// The headers a request's revision is checked against.
#[derive(Debug, Default, Clone, Copy)]
pub struct Headers<'a> {
    pub protocol_version: Option<&'a str>,
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
}

/// An HTTP answer: a status and a JSON body, written, or none (202).
#[derive(Debug, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub body: Option<String>,
}

/// What became of one message of a POST.
#[derive(Debug, PartialEq)]
pub enum Item {
    /// Answered here: the status it asks for, and its response (`None`
    /// for a notification or a client's response).
    Answered(Reply),
    /// A tool call for the room to carry out.
    CallTool(CallTool),
}

/// A `tools/call` request (the SDKs' `CallToolRequest`), for the room to
/// carry out, or to refuse and record.
#[derive(Debug, PartialEq)]
pub struct CallTool {
    pub id: Value,
    /// The revision its result is written in.
    pub version: &'static str,
    pub tool: Tool,
    pub arguments: Value,
    /// The client's name, where the request says it (2026-07-28 `_meta`).
    pub client: Option<String>,
    /// Why the caller's role may not make it, if it may not: its answer
    /// is then this tool error.
    pub refused: Option<String>,
}

/// A POST's messages, in order; `batch` when they came as an array.
#[derive(Debug, PartialEq)]
pub struct Post {
    pub batch: bool,
    pub items: Vec<Item>,
}

/// Reads a POST's body for a caller holding `role`. A body that is not one
/// message (or, in 2025-03-26, a batch of them) is answered whole.
pub fn read(headers: Headers<'_>, body: &[u8], role: RoomRole) -> Result<Post, Reply> {
    let parsed = std::str::from_utf8(body)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(text).ok());
    let Some(parsed) = parsed else {
        let why = "Parse error: the body is not JSON";
        return Err(refused(400, error(None, rpc::PARSE_ERROR, why)));
    };
    let Value::Array(messages) = parsed else {
        let item = message(&parsed, headers, role, false);
        return Ok(Post {
            batch: false,
            items: vec![item],
        });
    };
    // Only 2025-03-26 had batches; it had no version header.
    if version::legacy_of(headers.protocol_version) != Some(version::UNNAMED) {
        let why = "batches are not allowed in this protocol revision (only 2025-03-26 has them)";
        return Err(refused(400, error(None, INVALID_REQUEST, why)));
    }
    let initialize = messages.iter().any(|m| m["method"] == "initialize");
    if messages.is_empty() || messages.len() > MAX_MCP_CALLS || (initialize && messages.len() > 1) {
        let why = "a batch holds 1 to 8 messages, and initialize only alone";
        return Err(refused(400, error(None, INVALID_REQUEST, why)));
    }
    let items = messages
        .iter()
        .map(|m| message(m, headers, role, true))
        .collect();
    Ok(Post { batch: true, items })
}

/// The answer to a POST once its calls are answered (`answers`, one per
/// item): 202 when nothing needed one, else the response, or an array of
/// them for a batch.
pub fn reply(batch: bool, answers: Vec<Reply>) -> Reply {
    let status = match answers.as_slice() {
        [only] if !batch => only.status,
        _ => 200,
    };
    let mut bodies: Vec<String> = answers.into_iter().filter_map(|a| a.body).collect();
    match (batch, bodies.pop()) {
        (_, None) => Reply {
            status: 202,
            body: None,
        },
        (false, Some(body)) => Reply {
            status,
            body: Some(body),
        },
        (true, Some(last)) => {
            bodies.push(last);
            Reply {
                status,
                body: Some(format!("[{}]", bodies.join(","))),
            }
        }
    }
}

/// A call's answer: its result, JSON text, goes in as it is written
/// (`tools::Output`).
pub fn answer(call: &CallTool, output: &tools::Output) -> Reply {
    Reply {
        status: 200,
        body: Some(rpc::result_written(
            &call.id,
            call.version,
            output.to_result(),
        )),
    }
}

fn ok(body: Value) -> Reply {
    refused(200, body)
}

fn refused(status: u16, body: Value) -> Reply {
    Reply {
        status,
        body: Some(rpc::written(&body)),
    }
}

fn accepted() -> Item {
    Item::Answered(Reply {
        status: 202,
        body: None,
    })
}

/// One message of a POST.
fn message(message: &Value, headers: Headers<'_>, role: RoomRole, in_batch: bool) -> Item {
    let invalid = |why: &str| Item::Answered(refused(400, error(None, INVALID_REQUEST, why)));
    if !message.is_object() || message["jsonrpc"] != "2.0" {
        return invalid("Invalid Request: not a JSON-RPC 2.0 message");
    }
    // A revision not served is refused whatever the message, even one
    // that needs no answer (requests say more, below).
    let id = message.get("id");
    let answerless = id.is_none() || message.get("method").is_none();
    if let (true, Some(asked)) = (answerless, headers.protocol_version) {
        if !version::SUPPORTED.contains(&asked) {
            return invalid(&format!(
                "unsupported MCP-Protocol-Version {asked}; supported: {}",
                version::SUPPORTED.join(", ")
            ));
        }
    }
    let Some(method) = message.get("method") else {
        // A client's response (to a request this server never sends).
        return match message.get("result").or(message.get("error")) {
            Some(_) => accepted(),
            None => invalid("Invalid Request: neither a request, a notification nor a response"),
        };
    };
    let Some(method) = method.as_str() else {
        return invalid("Invalid Request: `method` must be a string");
    };
    let Some(id) = id else {
        return accepted(); // a notification: nothing to answer
    };
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return invalid("Invalid Request: `id` must be a string or an integer");
    }
    let params = match message.get("params") {
        None => &Value::Null,
        Some(params) if params.is_object() => params,
        Some(_) => {
            let e = error(
                Some(id),
                INVALID_PARAMS,
                "Invalid params: must be an object",
            );
            return Item::Answered(refused(400, e));
        }
    };
    let meta = &params["_meta"];
    let item = match meta[META_VERSION].as_str() {
        Some(requested) if !in_batch => modern(id, method, params, requested, headers, role),
        Some(_) => Err(refused(
            400,
            error(
                Some(id),
                INVALID_REQUEST,
                "2026-07-28 requests are not batched",
            ),
        )),
        None => legacy(id, method, params, headers, role),
    };
    item.unwrap_or_else(Item::Answered)
}

/// A request of the 2026-07-28 revision: its revision is the one served, the
/// headers say what the body says, and it names the client's capabilities.
fn modern(
    id: &Value,
    method: &str,
    params: &Value,
    requested: &str,
    headers: Headers<'_>,
    role: RoomRole,
) -> Result<Item, Reply> {
    if requested != MODERN {
        return Err(refused(400, rpc::unsupported(Some(id), requested)));
    }
    let mismatch = |why: String| refused(400, error(Some(id), rpc::HEADER_MISMATCH, &why));
    if headers.protocol_version != Some(MODERN) {
        return Err(mismatch(format!(
            "the MCP-Protocol-Version header must be {MODERN}, as _meta says"
        )));
    }
    if headers.method != Some(method) {
        return Err(mismatch(format!(
            "the Mcp-Method header must be {method}, as the body says"
        )));
    }
    if method == "tools/call" {
        let named = headers.name.and_then(version::header_text);
        if params["name"].as_str().is_none() || named.as_deref() != params["name"].as_str() {
            return Err(mismatch(
                "the Mcp-Name header must name the tool the body calls".into(),
            ));
        }
    }
    if !params["_meta"][META_CAPABILITIES].is_object() {
        let why = format!("Invalid params: _meta must carry {META_CAPABILITIES}");
        return Err(refused(400, error(Some(id), INVALID_PARAMS, &why)));
    }
    let client = params["_meta"][META_CLIENT]["name"]
        .as_str()
        .map(str::to_owned);
    match method {
        "server/discover" => Ok(Item::Answered(ok(rpc::result(
            id,
            MODERN,
            object(vec![
                ("supportedVersions", version::SUPPORTED.to_vec().into()),
                ("capabilities", capabilities()),
                ("instructions", INSTRUCTIONS.into()),
                ("ttlMs", LIST_TTL_MS.into()),
                ("cacheScope", "public".into()),
                ("_meta", object(vec![(META_SERVER, server_info())])),
            ]),
        )))),
        "tools/list" => Ok(Item::Answered(ok(rpc::result(
            id,
            MODERN,
            object(vec![
                ("tools", tools::listed(role).into()),
                ("ttlMs", LIST_TTL_MS.into()),
                ("cacheScope", "private".into()),
            ]),
        )))),
        "tools/call" => Ok(call(id, MODERN, params, role, client)),
        _ => Err(refused(404, not_found(id, method))),
    }
}

/// A request of a revision negotiated by `initialize`.
fn legacy(
    id: &Value,
    method: &str,
    params: &Value,
    headers: Headers<'_>,
    role: RoomRole,
) -> Result<Item, Reply> {
    if method == "initialize" {
        let version = version::negotiate(params["protocolVersion"].as_str());
        return Ok(Item::Answered(ok(rpc::result(
            id,
            version,
            object(vec![
                ("protocolVersion", version.into()),
                ("capabilities", capabilities()),
                ("serverInfo", server_info()),
                ("instructions", INSTRUCTIONS.into()),
            ]),
        ))));
    }
    let Some(version) = version::legacy_of(headers.protocol_version) else {
        let why = match headers.protocol_version {
            Some(MODERN) => format!(
                "a {MODERN} request names its revision in params._meta[\"{META_VERSION}\"] too"
            ),
            asked => format!(
                "unsupported MCP-Protocol-Version {}; supported: {}",
                asked.unwrap_or_default(),
                version::SUPPORTED.join(", ")
            ),
        };
        return Err(refused(400, error(Some(id), INVALID_REQUEST, &why)));
    };
    match method {
        "ping" => Ok(Item::Answered(ok(rpc::result(id, version, object(vec![]))))),
        "tools/list" => Ok(Item::Answered(ok(rpc::result(
            id,
            version,
            object(vec![("tools", tools::listed(role).into())]),
        )))),
        "tools/call" => Ok(call(id, version, params, role, None)),
        // In-band, as a handler's error is in these revisions.
        _ => Ok(Item::Answered(ok(not_found(id, method)))),
    }
}

fn not_found(id: &Value, method: &str) -> Value {
    error(
        Some(id),
        METHOD_NOT_FOUND,
        &format!("Method not found: {method}"),
    )
}

fn server_info() -> Value {
    object(vec![
        ("name", "duet".into()),
        ("title", "Duet room".into()),
        ("version", env!("CARGO_PKG_VERSION").into()),
    ])
}

/// Tools, whose list never changes while a worker runs.
fn capabilities() -> Value {
    let tools = object(vec![("listChanged", false.into())]);
    object(vec![("tools", tools)])
}

/// A `tools/call`: an unknown tool or unreadable params are protocol
/// errors; a tool the role does not allow is a tool error, which the
/// caller's model reads (and the room's audit records, as every call).
fn call(
    id: &Value,
    version: &'static str,
    params: &Value,
    role: RoomRole,
    client: Option<String>,
) -> Item {
    let invalid = |why: String| Item::Answered(ok(error(Some(id), INVALID_PARAMS, &why)));
    let Some(name) = params["name"].as_str() else {
        return invalid("Invalid params: tools/call needs `name`, a string".into());
    };
    let Some(tool) = Tool::named(name) else {
        return invalid(format!("Unknown tool: {name}"));
    };
    let arguments = match &params["arguments"] {
        Value::Null => Value::Object(Map::new()),
        Value::Object(_) => params["arguments"].clone(),
        _ => return invalid("Invalid params: `arguments` must be an object".into()),
    };
    let refused = (tool.needed() > role).then(|| {
        format!(
            "{name} needs the {} role; this token gives {}",
            tool.needed().name(),
            role.name()
        )
    });
    Item::CallTool(CallTool {
        id: id.clone(),
        version,
        tool,
        arguments,
        client,
        refused,
    })
}

#[cfg(test)]
mod tests;
