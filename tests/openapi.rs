//! Keeps `docs/openapi.yaml` true to the code, checked by the compiler where
//! it can be: the limits are `api::limits`' constants, the routes are the ones
//! `api::route` parses and the 404 names, and every status an `ApiError` can
//! have is documented (the list of errors below must name every variant, or
//! this file does not compile).
#![cfg(not(target_arch = "wasm32"))]

use std::collections::BTreeSet;

use duet_cf_worker::access::roles;
use duet_cf_worker::api::error::{FieldErrors, ENDPOINTS};
use duet_cf_worker::api::limits::*;
use duet_cf_worker::api::role::RoomRole;
use duet_cf_worker::api::route::{self, Action, Page, Route};
use duet_cf_worker::api::ApiError;
use duet_cf_worker::approvals::policy::AgentCommands;
use serde_json::{json, Value};

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

fn doc() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.yaml"))
        .expect("docs/openapi.yaml");
    serde_yaml_ng::from_str(&text).expect("docs/openapi.yaml is YAML")
}

/// Every (METHOD, path, operation) of the document.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut all = vec![];
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                all.push((method.to_uppercase(), path.clone(), op.clone()));
            }
        }
    }
    all
}

fn operation(doc: &Value, id: &str) -> Value {
    operations(doc)
        .into_iter()
        .map(|(_, _, op)| op)
        .find(|op| op["operationId"] == id)
        .unwrap_or_else(|| panic!("operation {id}"))
}

/// Resolves a local `$ref`.
fn resolve<'a>(doc: &'a Value, node: &'a Value) -> &'a Value {
    match node["$ref"].as_str() {
        Some(target) => doc.pointer(target.trim_start_matches('#')).expect(target),
        None => node,
    }
}

/// One error of every kind. The match makes a new variant a compile error
/// here until it is listed (and so its status checked below).
fn every_error() -> Vec<ApiError> {
    let all = vec![
        ApiError::Invalid(FieldErrors::new()),
        ApiError::BadJson(String::new()),
        ApiError::NotAnObject,
        ApiError::Unauthorized,
        ApiError::TokenExpired,
        ApiError::TokenRevoked,
        ApiError::OtherRoom,
        ApiError::Forbidden {
            needed: RoomRole::Owner,
            held: RoomRole::Watcher,
        },
        ApiError::OpenAccess,
        ApiError::AccessNotConfigured(String::new()),
        ApiError::CrossSite(String::new()),
        ApiError::MisdirectedHost {
            host: String::new(),
            known: String::new(),
        },
        ApiError::NotJson,
        ApiError::NotFound,
        ApiError::MethodNotAllowed("GET"),
        ApiError::PayloadTooLarge(0),
        ApiError::UnreadableBody(String::new()),
        ApiError::CleanedUp,
        ApiError::NoKeptArchive,
        ApiError::NoSuchApproval,
        ApiError::NoSuchJob,
        ApiError::TooManyJobs,
        ApiError::AlreadyDecided(String::new()),
        ApiError::NotConfigured(String::new()),
        ApiError::NotAWebSocket,
        ApiError::NoSubprotocol("duet.v1"),
        ApiError::TooManyWatchers(0),
        ApiError::AiUnavailable(String::new()),
        ApiError::AiFailed(String::new()),
        ApiError::AiBusy(String::new()),
        ApiError::AiTimeout(0),
        ApiError::SandboxUnavailable(String::new()),
        ApiError::SandboxFailed(String::new()),
        ApiError::SandboxTimeout(0),
        ApiError::Waking(String::new()),
        ApiError::Internal(String::new()),
    ];
    for e in &all {
        match e {
            ApiError::Invalid(_)
            | ApiError::BadJson(_)
            | ApiError::NotAnObject
            | ApiError::Unauthorized
            | ApiError::TokenExpired
            | ApiError::TokenRevoked
            | ApiError::OtherRoom
            | ApiError::Forbidden { .. }
            | ApiError::OpenAccess
            | ApiError::AccessNotConfigured(_)
            | ApiError::CrossSite(_)
            | ApiError::MisdirectedHost { .. }
            | ApiError::NotJson
            | ApiError::NotFound
            | ApiError::MethodNotAllowed(_)
            | ApiError::PayloadTooLarge(_)
            | ApiError::UnreadableBody(_)
            | ApiError::CleanedUp
            | ApiError::NoKeptArchive
            | ApiError::NoSuchApproval
            | ApiError::NoSuchJob
            | ApiError::TooManyJobs
            | ApiError::AlreadyDecided(_)
            | ApiError::NotConfigured(_)
            | ApiError::NotAWebSocket
            | ApiError::NoSubprotocol(_)
            | ApiError::TooManyWatchers(_)
            | ApiError::AiUnavailable(_)
            | ApiError::AiFailed(_)
            | ApiError::AiBusy(_)
            | ApiError::AiTimeout(_)
            | ApiError::SandboxUnavailable(_)
            | ApiError::SandboxFailed(_)
            | ApiError::SandboxTimeout(_)
            | ApiError::Waking(_)
            | ApiError::Internal(_) => {}
        }
    }
    all
}

#[test]
fn it_is_openapi_3() {
    let doc = doc();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert!(doc["paths"].is_object());
}

#[test]
fn x_limits_are_the_code_s() {
    assert_eq!(
        doc()["info"]["x-limits"],
        json!({
            "maxBodyBytes": MAX_BODY_BYTES,
            "roomIdMaxChars": MAX_ROOM_ID_CHARS,
            "textMaxChars": MAX_TEXT_CHARS,
            "userIdMaxChars": MAX_USER_ID_CHARS,
            "cmdMaxChars": MAX_CMD_CHARS,
            "timeoutMsMax": EXEC_MAX_TIMEOUT_MS,
            "timeoutMsDefault": EXEC_DEFAULT_TIMEOUT_MS,
            "historyLimit": HISTORY_LIMIT,
            "historyContextChars": MAX_HISTORY_CONTEXT_CHARS,
            "policyRulesMax": MAX_POLICY_RULES,
            "ruleMaxChars": MAX_RULE_CHARS,
            "auditEntries": AUDIT_ENTRIES,
            "auditCmdChars": AUDIT_CMD_CHARS,
            "approvalTimeoutSecondsDefault": APPROVAL_TIMEOUT_SECONDS,
        })
    );
    let description = doc()["info"]["description"].as_str().unwrap().to_owned();
    for value in [MAX_BODY_BYTES, MAX_TEXT_CHARS, EXEC_MAX_TIMEOUT_MS as usize] {
        assert!(
            description.contains(&value.to_string()),
            "info.description mentions {value}"
        );
    }
}

#[test]
fn room_ids() {
    let doc = doc();
    let room = &doc["components"]["parameters"]["RoomId"];
    assert_eq!(room["in"], "path");
    assert_eq!(room["schema"]["minLength"], 1);
    assert_eq!(room["schema"]["maxLength"], MAX_ROOM_ID_CHARS);
    assert_eq!(
        room["schema"]["pattern"],
        format!("^[A-Za-z0-9._-]{{1,{MAX_ROOM_ID_CHARS}}}$")
    );
    let sandbox_name = doc["components"]["schemas"]["ExecResponse"]["properties"]["sandboxName"]
        ["pattern"]
        .as_str()
        .unwrap();
    assert!(sandbox_name.contains(&format!("{{1,{MAX_ROOM_ID_CHARS}}}")));
    for (path, item) in doc["paths"].as_object().unwrap() {
        if path.contains("{roomId}") {
            // The room first; the files' path beside it.
            assert_eq!(
                item["parameters"][0],
                json!({"$ref": "#/components/parameters/RoomId"}),
                "{path}"
            );
        }
    }
}

#[test]
fn request_fields() {
    let doc = doc();
    let schemas = &doc["components"]["schemas"];
    let message = &schemas["MessageRequest"];
    assert_eq!(message["required"], json!(["text"]));
    assert_eq!(message["properties"]["text"]["minLength"], 1);
    assert_eq!(message["properties"]["text"]["maxLength"], MAX_TEXT_CHARS);
    assert_eq!(message["properties"]["userId"]["minLength"], 1);
    assert_eq!(
        message["properties"]["userId"]["maxLength"],
        MAX_USER_ID_CHARS
    );
    let exec = &schemas["ExecRequest"];
    assert_eq!(exec["required"], json!(["cmd"]));
    assert_eq!(exec["properties"]["cmd"]["minLength"], 1);
    assert_eq!(exec["properties"]["cmd"]["maxLength"], MAX_CMD_CHARS);
    let timeout = &exec["properties"]["timeoutMs"];
    assert_eq!(timeout["type"], "integer");
    assert_eq!(timeout["minimum"], 1);
    assert_eq!(timeout["maximum"], EXEC_MAX_TIMEOUT_MS);
    assert_eq!(timeout["default"], EXEC_DEFAULT_TIMEOUT_MS);
    // "Not blank after trimming": Rust's str::trim removes Unicode White_Space.
    let not_blank = r"[^\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]";
    // Chat text also loses its control characters (text::without_controls).
    let chat_not_blank =
        r"[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]";
    assert_eq!(message["properties"]["text"]["pattern"], chat_not_blank);
    assert_eq!(message["properties"]["userId"]["pattern"], chat_not_blank);
    let no_nul = not_blank.replacen("[^", r"[^\u0000", 1);
    assert_eq!(
        exec["properties"]["cmd"]["pattern"],
        format!(r"^[^\u0000]*{no_nul}[^\u0000]*$")
    );
}

#[test]
fn history_is_bounded_and_ts_is_int64() {
    let doc = doc();
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["MessageList"]["maxItems"], HISTORY_LIMIT);
    assert_eq!(
        schemas["Message"]["properties"]["text"]["maxLength"],
        MAX_TEXT_CHARS
    );
    assert_eq!(
        schemas["MessageResponse"]["properties"]["reply"]["maxLength"],
        MAX_TEXT_CHARS
    );
    let send = operation(&doc, "sendMessage")["description"]
        .as_str()
        .unwrap()
        .to_owned();
    for bound in [MAX_TEXT_CHARS, QUOTED_CMD_CHARS, SUMMARY_CHARS] {
        assert!(
            send.contains(&bound.to_string()),
            "sendMessage states {bound}"
        );
    }
    assert_eq!(schemas["Message"]["properties"]["ts"]["type"], "integer");
    assert_eq!(schemas["Message"]["properties"]["ts"]["format"], "int64");
}

/// Every body's limit is its route's: JSON's, or a file's bytes.
#[test]
fn every_request_body_has_the_body_limit_and_a_413() {
    let doc = doc();
    let mut bodies = 0;
    for (method, path, op) in operations(&doc) {
        let Some(body) = op.get("requestBody") else {
            continue;
        };
        bodies += 1;
        let Ok(Route::Room { action, .. }) = route::parse(&method, &concrete(&path)) else {
            panic!("{method} {path}");
        };
        assert_eq!(
            resolve(&doc, body)["x-max-body-bytes"].as_u64(),
            action.body_limit(),
            "{method} {path}"
        );
        assert!(
            op["responses"].get("413").is_some(),
            "{method} {path} documents 413"
        );
    }
    assert_eq!(bodies, 9);
    let too_large = doc["components"]["responses"]["PayloadTooLarge"]["description"]
        .as_str()
        .unwrap();
    assert!(too_large.contains(&MAX_BODY_BYTES.to_string()));
}

#[test]
fn the_routes_are_the_ones_the_worker_parses_and_names() {
    let doc = doc();
    let mut documented = BTreeSet::new();
    for (method, path, _) in operations(&doc) {
        let concrete = concrete(&path);
        let parsed = route::parse(&method, &concrete)
            .unwrap_or_else(|e| panic!("{method} {path} is not a route: {e}"));
        let expected = match (method.as_str(), path.as_str()) {
            ("GET" | "HEAD", "/health") => Route::Health,
            ("GET" | "HEAD", "/") => Route::Page(Page::Home),
            ("GET" | "HEAD", "/rooms/{roomId}") => Route::Page(Page::Room("r1".into())),
            ("GET" | "HEAD", "/assets/{name}") => Route::Page(Page::Asset("a.js".into())),
            ("GET", "/api/rooms/{roomId}/live") => room(Action::Live),
            (_, "/api/rooms/{roomId}/message" | "/api/rooms/{roomId}/messages")
                if method == "POST" =>
            {
                room(Action::SendMessage)
            }
            ("GET", "/api/rooms/{roomId}/messages") => room(Action::History),
            ("POST", "/api/rooms/{roomId}/sandbox/exec") => room(Action::Exec),
            ("GET", "/api/rooms/{roomId}/sandbox/archive") => room(Action::KeptArchive),
            ("DELETE", "/api/rooms/{roomId}") => room(Action::Cleanup),
            ("POST", "/api/rooms/{roomId}/invites") => room(Action::Invite),
            ("DELETE", "/api/rooms/{roomId}/invites") => room(Action::Revoke),
            ("GET", "/api/rooms/{roomId}/policy") => room(Action::Policy),
            ("PUT", "/api/rooms/{roomId}/policy") => room(Action::SetPolicy),
            ("GET", "/api/rooms/{roomId}/approvals") => room(Action::Approvals),
            ("POST", "/api/rooms/{roomId}/approvals/{approvalId}") => {
                room(Action::Decide { approval: 1 })
            }
            ("GET", "/api/rooms/{roomId}/audit") => room(Action::Audit),
            ("POST", "/api/rooms/{roomId}/mcp") => room(Action::Mcp),
            ("POST", "/api/rooms/{roomId}/jobs") => room(Action::StartJob),
            ("GET", "/api/rooms/{roomId}/jobs") => room(Action::Jobs),
            ("GET", "/api/rooms/{roomId}/jobs/{jobId}") => room(Action::Job { job: 1 }),
            ("DELETE", "/api/rooms/{roomId}/jobs/{jobId}") => room(Action::StopJob { job: 1 }),
            ("GET", "/api/rooms/{roomId}/files") => room(Action::ReadFile),
            ("PUT", "/api/rooms/{roomId}/files") => room(Action::WriteFile),
            ("DELETE", "/api/rooms/{roomId}/files") => room(Action::DeleteFile),
            ("GET", "/api/rooms/{roomId}/terminal") => room(Action::Terminal),
            _ => panic!("{method} {path} is documented but not known here"),
        };
        assert_eq!(parsed, expected, "{method} {path}");
        documented.insert(format!("{method} {path}"));
    }
    let named: BTreeSet<String> = ENDPOINTS.split(',').map(|e| e.trim().to_owned()).collect();
    assert_eq!(
        documented, named,
        "the 404 names exactly the documented routes"
    );
}

/// A documented path with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{roomId}", "r1")
        .replace("{approvalId}", "1")
        .replace("{jobId}", "j0000000000000001")
        .replace("{name}", "a.js")
}

fn room(action: Action) -> Route {
    Route::Room {
        room: "r1".into(),
        action,
    }
}

#[test]
fn every_status_the_worker_gives_but_500_is_documented() {
    let doc = doc();
    let mut documented: BTreeSet<String> = ["200", "207"].map(String::from).into();
    for (_, _, op) in operations(&doc) {
        documented.extend(op["responses"].as_object().unwrap().keys().cloned());
    }
    for e in every_error() {
        let status = e.status();
        // 404 and 405 belong to no operation: unknown paths, wrong methods.
        if matches!(status, 500 | 404 | 405) {
            continue;
        }
        assert!(
            documented.contains(&status.to_string()),
            "{status} ({e:?}) is documented"
        );
    }
    for id in ["sendMessage", "sendMessages", "execCommand"] {
        let responses = &operation(&doc, id)["responses"];
        for code in [
            "400", "401", "403", "409", "413", "415", "502", "503", "504",
        ] {
            assert!(responses.get(code).is_some(), "{id} documents {code}");
        }
    }
    for id in ["cleanupRoom", "liveFeed", "sharedTerminal"] {
        let responses = &operation(&doc, id)["responses"];
        assert!(responses.get("403").is_some(), "{id} documents 403");
    }
    // Every room route can refuse a token (401), a host not the worker's
    // own (421), and be misconfigured (503); one above a watcher's role, or refused to other sites, a 403.
    for (method, path, op) in operations(&doc) {
        let Ok(Route::Room { action, .. }) = route::parse(&method, &concrete(&path)) else {
            continue;
        };
        // A file's path may also lead out through a symlink (403).
        let forbidden = roles::needed(action) > RoomRole::Watcher
            || action.needs_own_origin()
            || action == Action::ReadFile;
        let codes = [
            ("401", true),
            ("403", forbidden),
            ("421", true),
            ("503", true),
        ];
        for (code, documented) in codes {
            assert_eq!(
                op["responses"].get(code).is_some(),
                documented,
                "{method} {path} documents {code}: {documented}"
            );
        }
    }
}

/// Each room route states the role it needs, as `api::access` says.
#[test]
fn every_room_route_names_the_role_it_needs() {
    let doc = doc();
    for (method, path, op) in operations(&doc) {
        if !path.starts_with("/api/") {
            continue;
        }
        let Ok(Route::Room { action, .. }) = route::parse(&method, &concrete(&path)) else {
            panic!("{method} {path}");
        };
        assert_eq!(
            op["x-role"],
            roles::needed(action).name(),
            "{method} {path}"
        );
    }
}

#[test]
fn invites_are_bounded_as_the_code_bounds_them() {
    let doc = doc();
    let invite = &doc["components"]["schemas"]["InviteRequest"];
    assert_eq!(invite["required"], json!(["role"]));
    assert_eq!(
        invite["properties"]["role"]["enum"],
        json!(["watcher", "writer", "owner"])
    );
    let ttl = &invite["properties"]["ttlSeconds"];
    assert_eq!(ttl["minimum"], 1);
    assert_eq!(ttl["maximum"], INVITE_MAX_TTL_SECONDS);
    assert_eq!(ttl["default"], INVITE_DEFAULT_TTL_SECONDS);
    assert_eq!(invite["properties"]["name"]["maxLength"], MAX_USER_ID_CHARS);
    assert_eq!(
        invite["properties"]["name"]["pattern"],
        doc["components"]["schemas"]["MessageRequest"]["properties"]["userId"]["pattern"]
    );
}

#[test]
fn policies_decisions_and_the_audit_are_bounded_as_the_code_bounds_them() {
    let doc = doc();
    let schemas = &doc["components"]["schemas"];
    let modes: Vec<&str> = AgentCommands::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(schemas["AgentCommands"]["enum"], json!(modes));
    assert_eq!(schemas["RuleList"]["maxItems"], MAX_POLICY_RULES);
    assert_eq!(schemas["Rule"]["minLength"], 1);
    assert_eq!(schemas["Rule"]["maxLength"], MAX_RULE_CHARS);
    for field in ["agentCommands", "allow", "deny"] {
        assert_eq!(
            schemas["PolicyUpdate"]["properties"][field], schemas["Policy"]["properties"][field],
            "{field}"
        );
    }
    let decision = &schemas["DecisionRequest"];
    assert_eq!(decision["required"], json!(["decision"]));
    assert_eq!(
        decision["properties"]["decision"]["enum"],
        json!(["approve", "deny"])
    );
    // Who decides, and who asks for an exec, are named as a message's sender.
    let user_id = &schemas["MessageRequest"]["properties"]["userId"];
    for schema in ["DecisionRequest", "ExecRequest"] {
        let named = &schemas[schema]["properties"]["userId"];
        for key in ["type", "nullable", "minLength", "maxLength", "pattern"] {
            assert_eq!(named[key], user_id[key], "{schema}.userId.{key}");
        }
    }
    assert_eq!(
        schemas["AuditResponse"]["properties"]["entries"]["maxItems"],
        AUDIT_ENTRIES
    );
    assert_eq!(
        schemas["AuditEntry"]["properties"]["command"]["maxLength"],
        AUDIT_CMD_CHARS
    );
    let approval = &doc["components"]["parameters"]["ApprovalId"];
    assert_eq!(approval["in"], "path");
    assert_eq!(approval["schema"]["type"], "integer");
    assert_eq!(approval["schema"]["minimum"], 1);
    let description = doc["info"]["description"].as_str().unwrap().to_owned();
    for value in [
        MAX_POLICY_RULES,
        MAX_RULE_CHARS,
        AUDIT_ENTRIES,
        AUDIT_CMD_CHARS,
    ] {
        assert!(
            description.contains(&value.to_string()),
            "info.description mentions {value}"
        );
    }
}

#[test]
fn jobs_are_bounded_as_the_code_bounds_them() {
    let doc = doc();
    let jobs = &operation(&doc, "listJobs")["responses"]["200"]["content"]["application/json"]
        ["schema"]["properties"]["jobs"];
    assert_eq!(
        jobs["maxItems"],
        duet_wire::job::MAX_RUNNING_JOBS + ENDED_JOBS_KEPT
    );
    let start = operation(&doc, "startJob");
    let described = start["description"].as_str().unwrap();
    for bound in [JOB_MAX_SECONDS as usize, duet_wire::job::MAX_RUNNING_JOBS] {
        assert!(
            described.contains(&bound.to_string()),
            "startJob states {bound}"
        );
    }
    assert!(start["responses"].get("429").is_some());
    let job = &doc["components"]["parameters"]["JobId"]["schema"];
    assert_eq!(job["pattern"], "^j[0-9a-f]{16}$");
}

#[test]
fn cleanup_documents_200_and_207_bodies() {
    let doc = doc();
    let cleanup = &operation(&doc, "cleanupRoom")["responses"];
    assert_eq!(
        cleanup["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/CleanupResponse"
    );
    assert_eq!(
        cleanup["207"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/PartialCleanupResponse"
    );
}

#[test]
fn every_ref_resolves() {
    fn walk(doc: &Value, node: &Value, at: &str) {
        match node {
            Value::Object(map) => {
                if let Some(target) = map.get("$ref").and_then(Value::as_str) {
                    assert!(
                        doc.pointer(target.trim_start_matches('#')).is_some(),
                        "{at}: {target}"
                    );
                }
                for (key, value) in map {
                    walk(doc, value, &format!("{at}/{key}"));
                }
            }
            Value::Array(items) => {
                for (i, value) in items.iter().enumerate() {
                    walk(doc, value, &format!("{at}/{i}"));
                }
            }
            _ => {}
        }
    }
    let doc = doc();
    walk(&doc, &doc, "#");
}
