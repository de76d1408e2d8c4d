//! The egress settings workerd pushes with `PUT /egress`, decoded as
//! proxy-everything decodes them: a JSON object naming at least one of
//! `port`, `internet.enabled` and `dns.allowHostnames`, each of its type;
//! an absent or null field changes nothing. Anything else is refused whole.

use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct Egress {
    /// The port of workerd's egress listener on the bridge's gateway.
    pub port: u16,
    pub internet: bool,
    pub allow_hostnames: Vec<String>,
}

impl Egress {
    /// proxy-everything's state before any `PUT /egress`: its flag's port,
    /// the internet on, every name allowed.
    pub fn at_start(port: u16) -> Self {
        Egress {
            port,
            internet: true,
            allow_hostnames: vec!["*".into()],
        }
    }

    /// Applies a `PUT /egress` body; on refusal nothing changes.
    pub fn update(&mut self, body: &[u8]) -> Result<(), &'static str> {
        let update = match serde_json::from_slice(body).map_err(|_| "not JSON")? {
            Value::Null => Map::new(),
            Value::Object(update) => update,
            _ => return Err("not a JSON object"),
        };
        let given = |name: &str| update.get(name).filter(|v| !v.is_null());
        let port = match given("port") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|p| *p >= 1)
                    .ok_or("port: not a port")?,
            ),
        };
        let enabled = match given("internet") {
            None => None,
            Some(Value::Object(internet)) => match internet.get("enabled") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(enabled)) => Some(*enabled),
                Some(_) => return Err("internet.enabled: not a boolean"),
            },
            Some(_) => return Err("internet: not an object"),
        };
        let hostnames = match given("dns") {
            None => None,
            Some(Value::Object(dns)) => match dns.get("allowHostnames") {
                None | Some(Value::Null) => None,
                Some(Value::Array(names)) => Some(
                    names
                        .iter()
                        .map(|n| n.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                        .ok_or("dns.allowHostnames: not strings")?,
                ),
                Some(_) => return Err("dns.allowHostnames: not a list"),
            },
            Some(_) => return Err("dns: not an object"),
        };
        if given("port").is_none() && given("internet").is_none() && given("dns").is_none() {
            return Err("empty payload");
        }
        if let Some(port) = port {
            self.port = port;
        }
        if let Some(enabled) = enabled {
            self.internet = enabled;
        }
        if let Some(hostnames) = hostnames {
            self.allow_hostnames = hostnames;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn updated(body: &str) -> Result<Egress, &'static str> {
        let mut egress = Egress::at_start(49121);
        egress.update(body.as_bytes()).map(|()| egress)
    }

    #[test]
    fn what_workerd_sends_is_applied() {
        let egress = updated(r#"{"port":40123,"dns":{"allowHostnames":["api.example.com"]},"internet":{"enabled":false}}"#).unwrap();
        assert_eq!(
            egress,
            Egress {
                port: 40123,
                internet: false,
                allow_hostnames: vec!["api.example.com".into()]
            }
        );
        // workerd leaves `internet` out until the container says otherwise.
        assert!(
            updated(r#"{"port":1,"dns":{"allowHostnames":[]}}"#)
                .unwrap()
                .internet
        );
    }

    #[test]
    fn absent_and_null_fields_change_nothing() {
        let egress =
            updated(r#"{"port":null,"internet":{"enabled":null},"dns":{"allowHostnames":["a"]}}"#)
                .unwrap();
        assert_eq!(
            egress,
            Egress {
                port: 49121,
                internet: true,
                allow_hostnames: vec!["a".into()]
            }
        );
    }

    #[test]
    fn a_wrong_field_refuses_the_whole_update() {
        for body in [
            "",
            "[]",
            "null",
            "{}",
            r#"{"port":0}"#,
            r#"{"port":65536}"#,
            r#"{"port":"80"}"#,
            r#"{"internet":true}"#,
            r#"{"internet":{"enabled":"yes"}}"#,
            r#"{"dns":{"allowHostnames":"a"}}"#,
            r#"{"dns":{"allowHostnames":[1]}}"#,
            r#"{"port":2,"dns":[]}"#,
        ] {
            let mut egress = Egress::at_start(49121);
            assert!(egress.update(body.as_bytes()).is_err(), "{body}");
            assert_eq!(egress, Egress::at_start(49121), "{body} changed nothing");
        }
    }
}
