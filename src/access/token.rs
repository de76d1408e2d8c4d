//! Room tokens as plain data: what one says and how it is written.
//!
//! A room token is `duet1.<payload>.<mac>`: the payload is the JSON of its
//! [`Claims`] (room, role, expiry, the room's generation, a name), the mac
//! HMAC-SHA256 of `duet1.<payload>` under the worker's key, both in unpadded
//! base64url. The front door checks the mac and the claims (room, expiry,
//! role) without a Durable Object; the generation, which revoking changes,
//! is checked by the room's object a request reaches (`access::generation`).
//! Signing is `access::signing`'s; this module only splits
//! and joins.

use serde::Serialize;

use super::presented;
use crate::api::role::RoomRole;
use crate::base64url;

/// What every room token starts with; the version of the format.
pub const PREFIX: &str = "duet1.";
/// Bytes of an HMAC-SHA256.
pub const MAC_BYTES: usize = 32;

/// What a room token grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claims {
    pub room: String,
    pub role: RoomRole,
    /// Milliseconds since the Unix epoch after which it is refused.
    #[serde(rename = "exp")]
    pub expires_at: u64,
    /// The room's generation when it was made; revoking starts another.
    #[serde(rename = "gen")]
    pub generation: String,
    /// Who it was made for, shown to the room's other watchers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Claims {
    /// The payload part of a token with these claims.
    pub fn payload(&self) -> String {
        base64url::encode(&serde_json::to_vec(self).expect("claims serialize"))
    }

    /// The claims of a payload; `None` if it is not one.
    pub fn from_payload(payload: &str) -> Option<Self> {
        // From text, as every JSON the worker reads (see `api::validate`),
        // through a `Value`, whose reader the upload has anyway.
        let json = String::from_utf8(base64url::decode(payload)?).ok()?;
        let claims: serde_json::Value = serde_json::from_str(&json).ok()?;
        let text = |key| claims[key].as_str().map(str::to_owned);
        Some(Self {
            room: text("room")?,
            role: RoomRole::parse(claims["role"].as_str()?)?,
            expires_at: claims["exp"].as_u64()?,
            generation: text("gen")?,
            name: match &claims["name"] {
                serde_json::Value::Null => None,
                name => Some(name.as_str()?.to_owned()),
            },
        })
    }

    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_at
    }
}

/// A presented text that has the form of a room token.
#[derive(Debug, PartialEq, Eq)]
pub struct Presented<'a> {
    /// What the mac is of: the prefix and the payload.
    pub signed: &'a str,
    pub payload: &'a str,
    pub mac: Vec<u8>,
}

/// Splits a presented token; `None` unless it has a room token's form.
pub fn parse(token: &str) -> Option<Presented<'_>> {
    let rest = token.strip_prefix(PREFIX)?;
    let (payload, mac) = rest.split_once('.')?;
    let mac = base64url::decode(mac).filter(|mac| mac.len() == MAC_BYTES)?;
    Some(Presented {
        signed: &token[..PREFIX.len() + payload.len()],
        payload,
        mac,
    })
}

/// Tokens already read and their claims, at most [`Known::MAX`] (then it
/// starts afresh): a busy room's requests carry the same few tokens, and
/// each would otherwise cost decoding its claims (and, where they are
/// verified, an HMAC) again. Found by the last 8 characters of the text (48
/// bits of its MAC), which tell nobody anything they could not guess, and
/// the token found is compared whole in constant time.
/// Each entry says whether its MAC was checked here: the front door takes
/// only those it checked, while an object takes what the front door let
/// through (see `access::request`).
#[derive(Default)]
pub struct Known(Vec<(u64, String, Claims, bool)>);

impl Known {
    pub const MAX: usize = 256;

    fn key(token: &str) -> u64 {
        let mut last = [0u8; 8];
        let tail = &token.as_bytes()[token.len().saturating_sub(8)..];
        last[..tail.len()].copy_from_slice(tail);
        u64::from_le_bytes(last)
    }

    /// The claims of `token`, if it is known, and whether its MAC was
    /// checked.
    pub fn get(&self, token: &str) -> Option<(Claims, bool)> {
        // A list, searched in place: a few hundred integers at most.
        let key = Self::key(token);
        let (_, known, claims, verified) = self.0.iter().find(|entry| entry.0 == key)?;
        presented::same_token(token, known).then(|| (claims.clone(), *verified))
    }

    pub fn insert(&mut self, token: &str, claims: &Claims, verified: bool) {
        if let Some(entry) = self
            .0
            .iter_mut()
            .find(|entry| presented::same_token(token, &entry.1))
        {
            entry.3 |= verified;
            return;
        }
        if self.0.len() >= Self::MAX {
            self.0.clear();
        }
        self.0
            .push((Self::key(token), token.to_owned(), claims.clone(), verified));
    }
}

/// What the mac of a token with `payload` is of.
pub fn signed(payload: &str) -> String {
    format!("{PREFIX}{payload}")
}

/// The token of a payload and its mac.
pub fn assemble(payload: &str, mac: &[u8]) -> String {
    format!("{PREFIX}{payload}.{}", base64url::encode(mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            room: "r-1".into(),
            role: RoomRole::Writer,
            expires_at: 1_764_400_000_000,
            generation: "00ff".into(),
            name: Some("bo ü".into()),
        }
    }

    #[test]
    fn a_token_splits_into_what_was_joined() {
        let payload = claims().payload();
        let mac = [7u8; MAC_BYTES];
        let token = assemble(&payload, &mac);
        assert!(token.starts_with("duet1.") && token.is_ascii());
        let presented = parse(&token).unwrap();
        assert_eq!(presented.signed, signed(&payload));
        assert_eq!(presented.mac, mac);
        assert_eq!(Claims::from_payload(presented.payload), Some(claims()));
    }

    #[test]
    fn claims_are_written_with_short_names() {
        let json: serde_json::Value =
            serde_json::from_slice(&base64url::decode(&claims().payload()).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"room": "r-1", "role": "writer", "exp": 1_764_400_000_000u64, "gen": "00ff", "name": "bo ü"})
        );
        let unnamed = Claims {
            name: None,
            ..claims()
        };
        assert_eq!(Claims::from_payload(&unnamed.payload()), Some(unnamed));
    }

    #[test]
    fn a_payload_with_a_claim_missing_or_of_the_wrong_kind_is_none() {
        let payload = |json: serde_json::Value| base64url::encode(json.to_string().as_bytes());
        let whole = serde_json::json!({"room": "r", "role": "owner", "exp": 5, "gen": "g"});
        assert!(Claims::from_payload(&payload(whole.clone())).is_some());
        for (key, bad) in [
            ("room", serde_json::json!(null)),
            ("role", serde_json::json!("admin")),
            ("exp", serde_json::json!(-1)),
            ("exp", serde_json::json!("5")),
            ("gen", serde_json::json!(7)),
            ("name", serde_json::json!(["bo"])),
        ] {
            let mut claims = whole.clone();
            claims[key] = bad;
            assert_eq!(Claims::from_payload(&payload(claims)), None, "{key}");
        }
        assert_eq!(Claims::from_payload("not base64!"), None);
        assert_eq!(Claims::from_payload(&base64url::encode(b"[]")), None);
    }

    #[test]
    fn only_the_form_of_a_room_token_parses() {
        let token = assemble(&claims().payload(), &[1u8; MAC_BYTES]);
        let (head, mac) = token.rsplit_once('.').unwrap();
        for bad in [
            "",
            "s3cret",
            "duet1.",
            "duet1.abc",
            &token[..token.len() - 1],
            &format!("{head}.{}", &mac[..mac.len() - 2]),
            &format!("{head}.{mac}A"),
            &token.replacen("duet1.", "duet2.", 1),
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert!(!claims().expired(1_764_399_999_999));
        assert!(claims().expired(1_764_400_000_000));
    }

    #[test]
    fn known_tokens_are_found_whole_and_bounded() {
        let mut known = Known::default();
        known.insert("duet1.a.bcdefghij", &claims(), false);
        assert_eq!(known.get("duet1.a.bcdefghij"), Some((claims(), false)));
        known.insert("duet1.a.bcdefghij", &claims(), true);
        assert_eq!(
            known.get("duet1.a.bcdefghij"),
            Some((claims(), true)),
            "checked since"
        );
        assert_eq!(known.0.len(), 1);
        // The same last 8 characters, another token: not it.
        assert_eq!(known.get("duet1.x.bcdefghij"), None);
        assert_eq!(known.get("duet1.a.bcdefghik"), None);
        assert_eq!(known.get("ghij"), None);
        for i in 0..Known::MAX {
            known.insert(&format!("duet1.t.{i:08}"), &claims(), true);
        }
        assert!(known.0.len() <= Known::MAX);
        assert_eq!(known.get("duet1.a.bcdefghij"), None, "started afresh");
        assert_eq!(known.get("duet1.t.00000255"), Some((claims(), true)));
    }
}
