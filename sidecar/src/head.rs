//! One HTTP/1.1 request head, read within bounds: workerd is the only
//! client, but the port is published on the host.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Longest head accepted; workerd's are a few hundred bytes.
const MAX_HEAD: usize = 16 * 1024;
/// Longest body accepted (`PUT /egress`'s allow-list).
const MAX_BODY: usize = 256 * 1024;
/// How long a client may take to send a request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Head {
    pub method: String,
    pub target: String,
    headers: Vec<(String, String)>,
    /// Bytes read past the head: the start of a body or of a tunnel.
    pub rest: Vec<u8>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads a head; None when the client sends none in time or an oversized or malformed one.
pub async fn read(stream: &mut TcpStream) -> Option<Head> {
    timeout(READ_TIMEOUT, async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
            if buf.len() > MAX_HEAD {
                return None;
            }
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let text = std::str::from_utf8(&buf[..end]).ok()?;
        let mut lines = text.split("\r\n");
        let mut request = lines.next()?.split(' ');
        let (method, target) = (request.next()?.to_owned(), request.next()?.to_owned());
        let headers = lines
            .map(|line| {
                line.split_once(':')
                    .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Head {
            method,
            target,
            headers,
            rest: buf[end + 4..].to_vec(),
        })
    })
    .await
    .ok()
    .flatten()
}

/// The request's body, by its Content-Length.
pub async fn body(stream: &mut TcpStream, head: &Head) -> Option<Vec<u8>> {
    let length: usize = head
        .header("content-length")
        .map_or(Some(0), |v| v.parse().ok())?;
    if length > MAX_BODY {
        return None;
    }
    let mut body = head.rest.clone();
    body.truncate(length);
    let mut more = vec![0u8; length - body.len()];
    timeout(READ_TIMEOUT, stream.read_exact(&mut more))
        .await
        .ok()?
        .ok()?;
    body.extend_from_slice(&more);
    Some(body)
}
