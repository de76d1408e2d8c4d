//! What a model is asked with: the context, an output bound, and thinking
//! turned off where the model allows it.
//!
//! Models differ in what they take. The older Workers AI models (the Llama
//! `-fast` variants, `{response}` answers) take `max_tokens`. The current
//! OpenAI-style ones (GLM, Gemma 4, Nemotron 3, Qwen 3, Kimi; `chat.completion`
//! answers) mark `max_tokens` deprecated in favour of `max_completion_tokens`,
//! and reason before answering unless their chat template is told not to
//! (`chat_template_kwargs.enable_thinking`, `thinking` for Kimi). Reasoning
//! would spend the model's time budget on text nobody sees. gpt-oss always
//! reasons; `reasoning_effort: "low"` keeps it short. Any other model gets
//! the properties every chat model accepts. Both backends send the same
//! input, since local servers (vLLM, llama.cpp, Ollama) follow the same
//! model families.
//!
//! Every answer is asked to stream (`stream: true`). The OpenAI-style
//! families are the ones whose catalog entries list function calling in the
//! OpenAI shape; they are offered the agent's tool (`exchange::tools`), unless
//! `AI_TOOLS` says otherwise. The rest ask through `<run>` tags.

use serde::Serialize;
use serde_json::value::RawValue;

use super::messages;
use crate::ai::messages::ChatMessage;

/// Output tokens asked of the model: room for a short, practical answer.
pub const MAX_OUTPUT_TOKENS: u32 = 512;

#[derive(Debug, Serialize)]
pub struct Input<'a> {
    pub messages: &'a [ChatMessage<'a>],
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<&'static RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<TemplateSwitch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<&'static str>,
}

/// The chat-template argument that turns a model's thinking off.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub enum TemplateSwitch {
    #[serde(rename = "enable_thinking")]
    EnableThinking(bool),
    #[serde(rename = "thinking")]
    Thinking(bool),
}

/// How a family of models is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    /// `{response}` models and anything unknown.
    Classic,
    /// OpenAI-style models whose thinking a chat-template flag turns off.
    Hybrid { kimi: bool },
    /// gpt-oss: reasoning is mandatory, its effort can be lowered.
    GptOss,
}

fn family(model: &str) -> Family {
    let name = model.to_ascii_lowercase();
    let has = |part: &str| name.contains(part);
    if has("gpt-oss") {
        Family::GptOss
    } else if has("kimi") {
        Family::Hybrid { kimi: true }
    } else if ["glm-", "gemma-4", "nemotron-3", "qwen3", "deepseek-v4"]
        .iter()
        .any(|part| has(part))
    {
        Family::Hybrid { kimi: false }
    } else {
        Family::Classic
    }
}

/// Whether `model` is offered tools by default: the OpenAI-style families.
pub fn calls_tools(model: &str) -> bool {
    matches!(family(model), Family::Hybrid { .. })
}

/// Whether `model`'s chat template opens its thinking block in the prompt,
/// so that its text starts as thoughts with no `<think>` (DeepSeek R1's
/// distillations, QwQ).
pub fn thinks_inline(model: &str) -> bool {
    let name = model.to_ascii_lowercase();
    name.contains("deepseek-r1") || name.contains("qwq")
}

/// The input for `model`, asking for at most [`MAX_OUTPUT_TOKENS`], with
/// the agent's tools when `tools`.
pub fn for_model<'a>(model: &str, messages: &'a [ChatMessage<'a>], tools: bool) -> Input<'a> {
    let tools = tools.then(|| {
        serde_json::from_str::<&RawValue>(messages::DEFINITIONS).expect("the tools are JSON")
    });
    let mut input = Input {
        messages,
        stream: true,
        tools,
        max_tokens: None,
        max_completion_tokens: None,
        chat_template_kwargs: None,
        reasoning_effort: None,
    };
    match family(model) {
        Family::Classic => input.max_tokens = Some(MAX_OUTPUT_TOKENS),
        Family::GptOss => {
            input.max_tokens = Some(MAX_OUTPUT_TOKENS);
            input.reasoning_effort = Some("low");
        }
        Family::Hybrid { kimi } => {
            input.max_completion_tokens = Some(MAX_OUTPUT_TOKENS);
            input.chat_template_kwargs = Some(if kimi {
                TemplateSwitch::Thinking(false)
            } else {
                TemplateSwitch::EnableThinking(false)
            });
        }
    }
    input
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(model: &str) -> serde_json::Value {
        let messages = [ChatMessage::text("user", "hi")];
        serde_json::to_value(for_model(model, &messages, false)).unwrap()
    }

    #[test]
    fn tools_are_offered_when_asked_and_every_answer_streams() {
        let messages = [ChatMessage::text("user", "hi")];
        let input =
            serde_json::to_value(for_model("@cf/zai-org/glm-4.7-flash", &messages, true)).unwrap();
        assert_eq!(input["stream"], true);
        assert_eq!(
            input["tools"][0]["function"]["name"],
            crate::api::shapes::RUN_COMMAND
        );
        assert!(json("@cf/zai-org/glm-4.7-flash").get("tools").is_none());
        assert!(calls_tools("@cf/zai-org/glm-4.7-flash"));
        assert!(calls_tools("@cf/moonshotai/kimi-k2.6"));
        assert!(!calls_tools("@cf/meta/llama-3.3-70b-instruct-fp8-fast"));
        assert!(!calls_tools("@cf/openai/gpt-oss-20b"));
        assert!(thinks_inline(
            "@cf/deepseek-ai/deepseek-r1-distill-qwen-32b"
        ));
        assert!(!thinks_inline("qwen3:8b"));
    }

    #[test]
    fn hybrid_models_think_not_and_use_max_completion_tokens() {
        for model in [
            "@cf/zai-org/glm-4.7-flash",
            "@cf/zai-org/glm-5.3-flash",
            "@cf/google/gemma-4-26b-a4b-it",
            "@cf/nvidia/nemotron-3-120b-a12b",
            "@cf/qwen/qwen3.8-27b",
            "qwen3:8b",
        ] {
            assert_eq!(
                json(model),
                serde_json::json!({
                    "messages": [{"role": "user", "content": "hi"}],
                    "stream": true,
                    "max_completion_tokens": MAX_OUTPUT_TOKENS,
                    "chat_template_kwargs": {"enable_thinking": false},
                }),
                "{model}"
            );
        }
    }

    #[test]
    fn kimi_has_its_own_switch() {
        let input = json("@cf/moonshotai/kimi-k2.6");
        assert_eq!(
            input["chat_template_kwargs"],
            serde_json::json!({"thinking": false})
        );
        assert!(input.get("max_tokens").is_none());
    }

    #[test]
    fn gpt_oss_reasons_briefly() {
        let input = json("@cf/openai/gpt-oss-20b");
        assert_eq!(input["reasoning_effort"], "low");
        assert_eq!(input["max_tokens"], MAX_OUTPUT_TOKENS);
        assert!(input.get("chat_template_kwargs").is_none());
    }

    #[test]
    fn classic_and_unknown_models_get_only_what_all_accept() {
        for model in [
            "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
            "llama3.2",
            "@cf/someone/new-model",
        ] {
            assert_eq!(
                json(model),
                serde_json::json!({
                    "messages": [{"role": "user", "content": "hi"}],
                    "stream": true,
                    "max_tokens": MAX_OUTPUT_TOKENS,
                }),
                "{model}"
            );
        }
    }
}
