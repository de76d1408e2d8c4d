//! The networking sidecar workerd starts beside each container when it runs
//! containers on a local Docker engine, built here because Cloudflare's own
//! (`cloudflare/proxy-everything`) cannot be pulled where the tests run.
//! Miniflare names it through `containerEgressInterceptorImage`.
//!
//! workerd creates it first, on the engine's bridge network with its
//! ingress port published on the host, and the container joins its network
//! namespace (`NetworkMode: container:<sidecar>`). Every request workerd
//! sends to a port of the container goes through it: a `CONNECT` with
//! `X-Dst-Addr: <host>:<port>` on the ingress port, which this program
//! tunnels to that port of the shared namespace, or answers 400 when
//! nothing listens there (workerd's "not listening" error). The same port
//! serves workerd's control routes: `PUT /egress` (the port of workerd's
//! egress listener, the internet switch, the DNS allow-list) and `GET /ca`.
//!
//! What it does not do: proxy-everything also captures the container's
//! outbound connections (iptables TPROXY) and hands them to workerd's
//! egress listener, so that workerd decides what the container may reach
//! and can intercept TLS with its CA. Here outbound connections leave
//! through the bridge as from any container; the egress settings are
//! validated and kept, and the CA is a placeholder nobody trusts.

mod control;
mod egress;
mod head;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Parser;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

use crate::egress::Egress;

/// proxy-everything's command line, as workerd writes it.
#[derive(Parser)]
#[command(version, about)]
struct Flags {
    /// The port of workerd's egress listener, until `PUT /egress` moves it.
    #[arg(long)]
    http_egress_port: u16,
    /// Where workerd's CONNECTs and control calls arrive.
    #[arg(long)]
    http_ingress_address: SocketAddr,
    /// The engine's bridge network, whose gateway is workerd's egress listener.
    #[arg(long)]
    docker_gateway_cidr: String,
    #[arg(long)]
    dns_enabled: bool,
    #[arg(long)]
    tls_intercept: bool,
    #[arg(long)]
    disable_ipv6: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let flags = Flags::parse();
    let listener = match TcpListener::bind(flags.http_ingress_address).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!(
                "sidecar: cannot listen on {}: {e}",
                flags.http_ingress_address
            );
            return ExitCode::FAILURE;
        }
    };
    let egress = Arc::new(Mutex::new(Egress::at_start(flags.http_egress_port)));
    eprintln!(
        "sidecar: listening on {} (gateway network {})",
        flags.http_ingress_address, flags.docker_gateway_cidr
    );
    // The engine stops a container with SIGTERM; as PID 1 nothing ends us
    // unless we end ourselves.
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return ExitCode::FAILURE;
    };
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                tokio::spawn(control::serve(stream, egress.clone()));
            }
            _ = term.recv() => return ExitCode::SUCCESS,
        }
    }
}
