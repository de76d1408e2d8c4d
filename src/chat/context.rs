//! What the model sees for one message: a system prompt, the room's recent
//! history, then the new message. Both AI backends send exactly this.

use serde::Serialize;

use crate::api::wire::{Message, Role};

/// Tells the model how to behave in a shared terminal room.
pub const SYSTEM_PROMPT: &str = "You are Duet, a pair-programming assistant in a shared \
terminal room. Several people may talk to you; be concise and practical. You can run shell \
commands in the room's Linux sandbox (bash; files and the working directory persist between \
commands). To run a command, write it exactly, alone, inside <run>...</run>, for example \
<run>ls -la</run>. Use at most five <run> tags in one answer. The output is appended to your \
answer after you finish, so never invent or predict a command's output. Only run commands \
that help with what was asked; never run destructive commands unless asked.";

/// One turn of an OpenAI-style chat, the shape both backends accept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage<'a> {
    pub role: &'static str,
    pub content: &'a str,
}

/// Builds the model's input: system prompt, stored history (oldest first), new text.
pub fn build<'a>(history: &'a [Message], text: &'a str) -> Vec<ChatMessage<'a>> {
    let system = ChatMessage {
        role: "system",
        content: SYSTEM_PROMPT,
    };
    let past = history.iter().map(|m| ChatMessage {
        role: match m.role {
            Role::User => "user",
            Role::Agent => "assistant",
        },
        content: &m.text,
    });
    let new = ChatMessage {
        role: "user",
        content: text,
    };
    std::iter::once(system)
        .chain(past)
        .chain(std::iter::once(new))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_then_history_then_new_message() {
        let history = vec![
            Message {
                role: Role::User,
                user_id: Some("ana".into()),
                text: "hi".into(),
                ts: 1,
            },
            Message {
                role: Role::Agent,
                user_id: None,
                text: "hello".into(),
                ts: 2,
            },
        ];
        let context = build(&history, "list files");
        let roles: Vec<_> = context.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(context[3].content, "list files");
        assert_eq!(context[2].content, "hello");
        assert!(context[0].content.contains("<run>"));
    }
}
