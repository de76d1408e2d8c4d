//! What only shows in wasm: how Rust values cross into JavaScript, as the
//! Workers AI binding is given and answers them.
#![cfg(target_arch = "wasm32")]

use duet_cf_worker::ai::input;
use duet_cf_worker::ai::workers_ai::to_js;
use duet_cf_worker::api::shapes::{Message, Role};
use duet_cf_worker::exchange::context;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;
use worker::js_sys::{Array, Map, Object, Reflect};

fn get(target: &JsValue, key: &str) -> JsValue {
    Reflect::get(target, &JsValue::from_str(key)).unwrap()
}

/// Workers AI reads `input.messages`; a `Map` would have none.
#[wasm_bindgen_test]
fn workers_ai_input_is_a_plain_object() {
    let history = [
        Message {
            role: Role::User,
            user_id: None,
            text: "before".into(),
            ts: 1,
        },
        Message {
            role: Role::Agent,
            user_id: None,
            text: "earlier".into(),
            ts: 2,
        },
    ];
    let messages = context::build(&history, "now", &[], true);
    let value = to_js(&input::for_model(
        "@cf/zai-org/glm-4.7-flash",
        &messages,
        true,
    ))
    .unwrap();
    assert!(!value.is_instance_of::<Map>());
    assert_eq!(
        Object::get_prototype_of(&value),
        Object::get_prototype_of(&Object::new())
    );
    let list: Array = get(&value, "messages").dyn_into().unwrap();
    assert_eq!(list.length(), 4);
    let second = list.get(2);
    assert!(!second.is_instance_of::<Map>());
    assert_eq!(get(&second, "role").as_string().unwrap(), "assistant");
    assert_eq!(get(&second, "content").as_string().unwrap(), "earlier");
    assert_eq!(
        get(&value, "max_completion_tokens").as_f64(),
        Some(f64::from(input::MAX_OUTPUT_TOKENS))
    );
    assert!(get(&value, "max_tokens").is_undefined());
    let switch = get(&value, "chat_template_kwargs");
    assert!(!switch.is_instance_of::<Map>());
    assert_eq!(get(&switch, "enable_thinking").as_bool(), Some(false));
    assert_eq!(get(&value, "stream").as_bool(), Some(true));
    let tools: Array = get(&value, "tools").dyn_into().unwrap();
    let function = get(&tools.get(0), "function");
    assert!(!function.is_instance_of::<Map>());
    assert_eq!(get(&function, "name").as_string().unwrap(), "run_command");
}

/// SQLite rows reach Rust as arrays of JS values: integers as numbers,
/// which the row readers take as integers (a message's `ts` among them).
#[wasm_bindgen_test]
fn stored_rows_keep_integer_times() {
    use duet_cf_worker::runtime::sql::{number, text};
    use worker::SqlStorageValue;
    let cells = [
        JsValue::from_str("user"),
        JsValue::NULL,
        JsValue::from_f64(1_764_400_000_000.0),
    ];
    let [role, user_id, ts] = cells.map(|cell| SqlStorageValue::try_from(cell).unwrap());
    assert_eq!(text(&role).as_deref(), Some("user"));
    assert_eq!(text(&user_id), None);
    assert_eq!(number(&ts), Some(1_764_400_000_000));
    let message = Message {
        role: Role::User,
        user_id: text(&user_id),
        text: "hi".into(),
        ts: number(&ts).unwrap() as i64,
    };
    assert_eq!(
        serde_json::to_string(&message).unwrap(),
        r#"{"role":"user","text":"hi","ts":1764400000000}"#
    );
}
