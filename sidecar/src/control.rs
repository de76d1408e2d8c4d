//! One connection to the ingress port: a control call, or a `CONNECT` that
//! becomes a tunnel to a port of the namespace the container shares.

use std::sync::{Arc, Mutex};

use tokio::io::{copy_bidirectional, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::egress::Egress;
use crate::head::{self, Head};

/// What `GET /ca` answers. workerd copies it into the container only when
/// a worker intercepts HTTPS egress, which this sidecar does not do.
const CA: &str =
    "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";

pub async fn serve(mut client: TcpStream, egress: Arc<Mutex<Egress>>) {
    let Some(head) = head::read(&mut client).await else {
        return;
    };
    let path = head.target.split('?').next().unwrap_or_default();
    let answer = match (head.method.as_str(), path) {
        ("CONNECT", _) => return tunnel(client, head).await,
        ("PUT", "/egress") => match head::body(&mut client, &head).await {
            Some(body)
                if egress
                    .lock()
                    .map(|mut e| e.update(&body).is_ok())
                    .unwrap_or(false) =>
            {
                "204 No Content"
            }
            _ => "400 Bad Request",
        },
        ("GET", "/ca") => {
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/x-pem-file\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{CA}",
                CA.len()
            );
            let _ = client.write_all(reply.as_bytes()).await;
            return;
        }
        ("GET" | "PUT", _) => "404 Not Found",
        _ => "405 Method Not Allowed",
    };
    let _ = client
        .write_all(
            format!("HTTP/1.1 {answer}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await;
}

/// Tunnels to `X-Dst-Addr` (or the request target), a loopback address of
/// the shared namespace; 400 when nothing listens there.
async fn tunnel(mut client: TcpStream, head: Head) {
    let destination = head.header("x-dst-addr").unwrap_or(&head.target);
    let upstream = match loopback_port(destination) {
        Some(port) => TcpStream::connect(("127.0.0.1", port)).await.ok(),
        None => None,
    };
    let Some(mut upstream) = upstream else {
        let refusal = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let _ = client.write_all(refusal).await;
        return;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await
        .is_err()
        || upstream.write_all(&head.rest).await.is_err()
    {
        return;
    }
    let _ = copy_bidirectional(&mut client, &mut upstream).await;
}

/// The port of `host:port` when the host is this namespace itself.
fn loopback_port(destination: &str) -> Option<u16> {
    let (host, port) = destination.rsplit_once(':')?;
    matches!(host, "127.0.0.1" | "localhost" | "0.0.0.0" | "[::1]").then_some(())?;
    port.parse().ok().filter(|p| *p != 0)
}

#[cfg(test)]
mod tests {
    use super::loopback_port;

    #[test]
    fn only_ports_of_the_namespace_are_tunnelled() {
        assert_eq!(loopback_port("localhost:8080"), Some(8080));
        assert_eq!(loopback_port("127.0.0.1:8080"), Some(8080));
        assert_eq!(loopback_port("[::1]:3000"), Some(3000));
        for refused in [
            "example.com:80",
            "10.0.0.1:8080",
            "localhost",
            "localhost:0",
            "localhost:99999",
            ":8080",
        ] {
            assert_eq!(loopback_port(refused), None, "{refused}");
        }
    }
}
