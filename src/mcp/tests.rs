use serde_json::{json, Value};

use super::*;

/// A reply's body, written, read back.
trait Written {
    fn json(self) -> Value;
}

impl Written for Option<String> {
    fn json(self) -> Value {
        serde_json::from_str(&self.expect("a body")).expect("the body is JSON")
    }
}

fn post(headers: Headers<'_>, body: &Value, role: RoomRole) -> Result<Post, Reply> {
    read(headers, body.to_string().as_bytes(), role)
}

/// The one answer of a single message answered here.
fn answered(headers: Headers<'_>, body: Value, role: RoomRole) -> Reply {
    match post(headers, &body, role) {
        Err(reply) => reply,
        Ok(Post {
            batch: false,
            mut items,
        }) => match items.pop() {
            Some(Item::Answered(reply)) => reply,
            other => panic!("not answered here: {other:?}"),
        },
        Ok(other) => panic!("a batch: {other:?}"),
    }
}

fn request(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

const LEGACY: Headers<'static> = Headers {
    protocol_version: Some("2025-11-25"),
    method: None,
    name: None,
};

fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> Headers<'a> {
    Headers {
        protocol_version: Some(MODERN),
        method: Some(method),
        name,
    }
}

fn modern(method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        META_VERSION: MODERN,
        META_CAPABILITIES: {},
        META_CLIENT: {"name": "probe", "version": "1"},
    });
    request(method, params)
}

#[test]
fn initialize_echoes_or_offers_the_newest_and_mints_no_session() {
    for (asked, given) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2025-11-25", "2025-11-25"),
        ("2024-11-05", "2025-11-25"),
    ] {
        let params = json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
        let reply = answered(
            Headers::default(),
            request("initialize", params),
            RoomRole::Watcher,
        );
        assert_eq!(reply.status, 200);
        let result = &reply.body.json()["result"];
        assert_eq!(result["protocolVersion"], given);
        assert_eq!(result["serverInfo"]["name"], "duet");
        assert!(result["capabilities"]["tools"].is_object());
        assert!(result.get("resultType").is_none());
    }
}

#[test]
fn notifications_and_responses_are_202() {
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = answered(LEGACY, note.clone(), RoomRole::Watcher);
    assert_eq!((accepted.status, accepted.body), (202, None));
    let response = json!({"jsonrpc": "2.0", "id": 4, "result": {}});
    assert_eq!(
        answered(LEGACY, response.clone(), RoomRole::Watcher).status,
        202
    );
    let unserved = Headers {
        protocol_version: Some("1999-01-01"),
        ..LEGACY
    };
    for message in [note, response] {
        let refused = answered(unserved, message, RoomRole::Watcher);
        assert_eq!(
            refused.status, 400,
            "an unserved revision, even with nothing to answer"
        );
    }
}

#[test]
fn ping_and_tools_list_by_role() {
    let pong = answered(LEGACY, request("ping", json!({})), RoomRole::Watcher);
    assert_eq!(pong.body.json()["result"], json!({}));
    let list = |role| {
        let reply = answered(LEGACY, request("tools/list", json!({})), role);
        let tools = reply.body.json()["result"]["tools"].clone();
        tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        list(RoomRole::Watcher),
        [
            "job_status",
            "read_file",
            "list_files",
            "read_terminal",
            "read_history"
        ]
    );
    assert_eq!(
        list(RoomRole::Writer),
        [
            "run_command",
            "start_job",
            "job_status",
            "stop_job",
            "read_file",
            "list_files",
            "write_file",
            "edit_file",
            "read_terminal",
            "write_terminal",
            "read_history",
            "send_message"
        ]
    );
}

#[test]
fn a_tool_call_is_handed_on_and_a_refused_one_is_a_tool_error() {
    let params = json!({"name": "run_command", "arguments": {"command": "ls"}});
    let Ok(Post { mut items, .. }) = post(
        LEGACY,
        &request("tools/call", params.clone()),
        RoomRole::Writer,
    ) else {
        panic!()
    };
    let Some(Item::CallTool(call)) = items.pop() else {
        panic!()
    };
    assert_eq!((call.tool, call.version), (Tool::RunCommand, "2025-11-25"));
    assert_eq!(call.arguments["command"], "ls");
    assert_eq!(call.refused, None);
    let Ok(Post { mut items, .. }) =
        post(LEGACY, &request("tools/call", params), RoomRole::Watcher)
    else {
        panic!()
    };
    let Some(Item::CallTool(call)) = items.pop() else {
        panic!()
    };
    let why = call.refused.clone().unwrap();
    assert_eq!(
        why,
        "run_command needs the writer role; this token gives watcher"
    );
    let result = &answer(&call, &tools::Output::Failed(why)).body.json()["result"];
    assert_eq!(result["isError"], true);
    assert_eq!(
        result["content"][0]["text"],
        "run_command needs the writer role; this token gives watcher"
    );
    let no_args = json!({"name": "read_history"});
    let Ok(Post { mut items, .. }) =
        post(LEGACY, &request("tools/call", no_args), RoomRole::Watcher)
    else {
        panic!()
    };
    let Some(Item::CallTool(call)) = items.pop() else {
        panic!()
    };
    assert_eq!(call.arguments, json!({}));
}

#[test]
fn unknown_methods_tools_and_bad_params() {
    let unknown = answered(
        LEGACY,
        request("resources/list", json!({})),
        RoomRole::Owner,
    );
    assert_eq!(unknown.status, 200, "in-band in the legacy era");
    assert_eq!(unknown.body.json()["error"]["code"], -32601);
    let tool = answered(
        LEGACY,
        request("tools/call", json!({"name": "rm"})),
        RoomRole::Owner,
    );
    let error = &tool.body.json()["error"];
    assert_eq!(
        (error["code"].clone(), error["message"].clone()),
        (json!(-32602), json!("Unknown tool: rm"))
    );
    for params in [
        json!({"arguments": {}}),
        json!({"name": "run_command", "arguments": [1]}),
    ] {
        let reply = answered(LEGACY, request("tools/call", params), RoomRole::Owner);
        assert_eq!(reply.body.json()["error"]["code"], -32602);
    }
    let not_object = answered(LEGACY, request("tools/list", json!([1])), RoomRole::Owner);
    assert_eq!(not_object.status, 400);
    assert_eq!(not_object.body.json()["error"]["code"], -32602);
}

#[test]
fn what_is_not_json_rpc_is_refused() {
    let reply = read(LEGACY, b"{not json", RoomRole::Owner).unwrap_err();
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body.json()["error"]["code"], -32700);
    for bad in [
        json!({"id": 1, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": 7}),
        json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}),
        json!({"jsonrpc": "2.0"}),
        json!("ping"),
    ] {
        let reply = answered(LEGACY, bad.clone(), RoomRole::Owner);
        assert_eq!(reply.status, 400, "{bad}");
        assert_eq!(reply.body.json()["error"]["code"], -32600, "{bad}");
    }
}

#[test]
fn an_unsupported_version_header_is_400() {
    let headers = Headers {
        protocol_version: Some("2024-11-05"),
        ..Headers::default()
    };
    let reply = answered(headers, request("tools/list", json!({})), RoomRole::Owner);
    assert_eq!(reply.status, 400);
    let missing = answered(
        Headers::default(),
        request("tools/list", json!({})),
        RoomRole::Owner,
    );
    assert_eq!(missing.status, 200, "no header is 2025-03-26");
}

#[test]
fn batches_only_in_2025_03_26() {
    let batch = json!([
        request("ping", json!({})),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_history"}},
    ]);
    let post = post(Headers::default(), &batch, RoomRole::Watcher).unwrap();
    assert!(post.batch);
    assert!(matches!(post.items[2], Item::CallTool(_)));
    let answers: Vec<Reply> = post
        .items
        .into_iter()
        .map(|item| match item {
            Item::Answered(reply) => reply,
            Item::CallTool(call) => {
                answer(&call, &tools::Output::Done(r#"{"messages":[]}"#.into()))
            }
        })
        .collect();
    let whole = reply(true, answers);
    assert_eq!(whole.status, 200);
    let body = whole.body.json();
    assert_eq!(body.as_array().unwrap().len(), 2);
    assert_eq!(body[1]["id"], 2);
    let later = Headers {
        protocol_version: Some("2025-06-18"),
        ..Headers::default()
    };
    let refused = super::read(later, batch.to_string().as_bytes(), RoomRole::Watcher).unwrap_err();
    assert_eq!(refused.status, 400);
    assert_eq!(refused.body.json()["error"]["code"], -32600);
    for bad in [
        json!([]),
        json!([request("initialize", json!({})), request("ping", json!({}))]),
    ] {
        assert_eq!(
            super::read(
                Headers::default(),
                bad.to_string().as_bytes(),
                RoomRole::Owner
            )
            .unwrap_err()
            .status,
            400
        );
    }
    let notes = json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}]);
    let post = super::read(
        Headers::default(),
        notes.to_string().as_bytes(),
        RoomRole::Owner,
    )
    .unwrap();
    let answers = post
        .items
        .into_iter()
        .map(|i| match i {
            Item::Answered(r) => r,
            Item::CallTool(_) => panic!(),
        })
        .collect();
    assert_eq!(
        reply(true, answers),
        Reply {
            status: 202,
            body: None
        }
    );
}

#[test]
fn modern_discover_list_and_call() {
    let discover = answered(
        modern_headers("server/discover", None),
        modern("server/discover", json!({})),
        RoomRole::Watcher,
    );
    assert_eq!(discover.status, 200);
    let result = discover.body.json()["result"].clone();
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"], json!(version::SUPPORTED));
    assert_eq!(result["_meta"][META_SERVER]["name"], "duet");
    let list = answered(
        modern_headers("tools/list", None),
        modern("tools/list", json!({})),
        RoomRole::Watcher,
    );
    let result = list.body.json()["result"].clone();
    assert_eq!(
        (result["resultType"].clone(), result["cacheScope"].clone()),
        (json!("complete"), json!("private"))
    );
    assert!(result["ttlMs"].is_u64());
    assert_eq!(result["tools"].as_array().unwrap().len(), 5);
    let params = json!({"name": "run_command", "arguments": {"command": "ls"}});
    let Ok(Post { mut items, .. }) = post(
        modern_headers("tools/call", Some("run_command")),
        &modern("tools/call", params),
        RoomRole::Writer,
    ) else {
        panic!()
    };
    let Some(Item::CallTool(call)) = items.pop() else {
        panic!()
    };
    assert_eq!(
        (call.version, call.client.as_deref()),
        (MODERN, Some("probe"))
    );
    let done = answer(&call, &tools::Output::Done(r#"{"exitCode":0}"#.into()));
    assert_eq!(done.body.json()["result"]["resultType"], "complete");
}

#[test]
fn modern_headers_must_match_the_body() {
    let params = json!({"name": "run_command", "arguments": {"command": "ls"}});
    let body = modern("tools/call", params);
    let cases = [
        (
            Headers {
                protocol_version: None,
                ..modern_headers("tools/call", Some("run_command"))
            },
            -32020,
        ),
        (
            Headers {
                protocol_version: Some("2025-11-25"),
                ..modern_headers("tools/call", Some("run_command"))
            },
            -32020,
        ),
        (modern_headers("tools/list", Some("run_command")), -32020),
        (modern_headers("tools/call", None), -32020),
        (modern_headers("tools/call", Some("read_history")), -32020),
    ];
    for (headers, code) in cases {
        let reply = answered(headers, body.clone(), RoomRole::Writer);
        assert_eq!(reply.status, 400, "{headers:?}");
        assert_eq!(reply.body.json()["error"]["code"], code, "{headers:?}");
    }
    let encoded = post(
        modern_headers("tools/call", Some("=?base64?cnVuX2NvbW1hbmQ=?=")),
        &body,
        RoomRole::Writer,
    );
    let Ok(Post { mut items, .. }) = encoded else {
        panic!("a base64 name is read: {encoded:?}")
    };
    assert!(matches!(items.pop(), Some(Item::CallTool(_))));
}

#[test]
fn modern_errors_have_their_codes_and_statuses() {
    let mut future = modern("tools/list", json!({}));
    future["params"]["_meta"][META_VERSION] = "2099-01-01".into();
    let reply = answered(modern_headers("tools/list", None), future, RoomRole::Owner);
    assert_eq!(reply.status, 400);
    let error = reply.body.json()["error"].clone();
    assert_eq!(error["code"], -32022);
    assert_eq!(error["data"]["requested"], "2099-01-01");
    assert_eq!(error["data"]["supported"][0], MODERN);
    let mut bare = modern("tools/list", json!({}));
    bare["params"]["_meta"] = json!({META_VERSION: MODERN});
    let reply = answered(modern_headers("tools/list", None), bare, RoomRole::Owner);
    assert_eq!(
        (reply.status, reply.body.json()["error"]["code"].clone()),
        (400, json!(-32602))
    );
    for method in ["ping", "initialize", "resources/list"] {
        let reply = answered(
            modern_headers(method, None),
            modern(method, json!({})),
            RoomRole::Owner,
        );
        assert_eq!(reply.status, 404, "{method}");
        assert_eq!(reply.body.json()["error"]["code"], -32601);
    }
    let legacy_discover = answered(
        LEGACY,
        request("server/discover", json!({})),
        RoomRole::Owner,
    );
    assert_eq!(legacy_discover.body.json()["error"]["code"], -32601);
}

#[test]
fn a_tool_result_goes_into_the_answer_as_it_was_written() {
    let params = json!({"name": "run_command", "arguments": {"command": "ls"}});
    let Ok(Post { mut items, .. }) = post(LEGACY, &request("tools/call", params), RoomRole::Writer)
    else {
        panic!()
    };
    let Some(Item::CallTool(call)) = items.pop() else {
        panic!()
    };
    // As sandboxd writes it: its own spacing and escapes are kept.
    let written = r#"{"stdout":"a \"b\"\n\u00e9","exitCode":0, "timedOut":false}"#;
    let body = answer(&call, &tools::Output::Done(written.into())).body;
    let text = body.clone().unwrap();
    assert!(text.contains(&format!(r#""structuredContent":{written}"#)));
    let result = &body.json()["result"];
    assert_eq!(result["content"][0]["text"], written);
    assert_eq!(result["structuredContent"]["stdout"], "a \"b\"\né");
    assert_eq!(result["isError"], false);
    assert!(result.get("resultType").is_none());
    assert_eq!(
        reply(
            true,
            vec![answer(&call, &tools::Output::Failed("no".into()))]
        )
        .body
        .json()[0]["result"]["isError"],
        true
    );
}
