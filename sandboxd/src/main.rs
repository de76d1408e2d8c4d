//! sandboxd: one persistent bash session per sandbox name, behind a small
//! HTTP/JSON API. It runs inside the container of a Duet room; the worker's
//! Sandbox Durable Object is its only client.
//!
//! This file holds startup and shutdown; see `http` for the protocol and
//! `session` for how the shell is driven.

mod abandon;
mod archive;
mod at;
mod config;
mod error;
mod files;
mod http;
mod jobs;
mod kept;
mod log;
mod output;
mod procs;
mod progress;
mod rlimits;
mod sandboxes;
mod session;
mod terminal;
mod timestamp;
mod workspace;

use std::ffi::CStr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

use crate::archive::Bounds;
use crate::config::Config;
use crate::http::App;
use crate::sandboxes::{Sandboxes, Settings};

/// PATH of every shell; sandboxd's own PATH is not passed on.
const SHELL_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// How long shutdown may take to end all jobs and sessions.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let config = match config::parse(std::env::args_os()) {
        Ok(config) => config,
        // Prints help or version to stdout (exit 0), errors to stderr (exit 2).
        Err(e) => e.exit(),
    };
    // Looked up before the runtime starts threads (getpwuid is not
    // thread-safe).
    let shell_env = shell_env(current_user());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("sandboxd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(config, shell_env)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sandboxd: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Config, shell_env: Vec<(String, String)>) -> Result<(), String> {
    let root_error = |e| format!("--root {}: {e}", config.root.display());
    std::fs::create_dir_all(&config.root).map_err(root_error)?;
    // Absolute, so HOME and cwd of every shell are too.
    let root = config.root.canonicalize().map_err(root_error)?;
    // Before the leftovers go: the records of jobs are among them.
    jobs::records::kill_leftovers(&root);
    workspace::remove_leftovers(&root);
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let mut terminate = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;

    let sandboxes = Sandboxes::new(Settings {
        root,
        shell_env,
        output_limit: config.output_limit,
        limits: config.limits,
        max_shells: config.max_sessions,
        idle_shell: config.idle_shell,
        restore: Bounds {
            bytes: config.max_restore_bytes,
            entries: config.max_restore_entries,
            ms: config.max_restore_ms,
        },
    });
    let app = Arc::new(App {
        sandboxes: Arc::clone(&sandboxes),
        default_timeout_ms: config.default_timeout_ms,
        max_timeout_ms: config.max_timeout_ms,
        max_archive_bytes: config.max_archive_bytes,
    });
    eprintln!("sandboxd listening on {local}");

    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Responses are single small writes; do not delay them.
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(http::serve_connection(stream, Arc::clone(&app)));
                }
                Err(e) => {
                    // Typically out of file descriptors: back off briefly.
                    eprintln!("sandboxd: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
    }
    eprintln!("sandboxd shutting down");
    if tokio::time::timeout(SHUTDOWN_GRACE, sandboxes.shutdown())
        .await
        .is_err()
    {
        eprintln!("sandboxd: jobs and sessions did not all end within {SHUTDOWN_GRACE:?}");
    }
    Ok(())
}

/// The complete environment of every shell apart from HOME, so nothing of
/// sandboxd's own environment (secrets included) reaches commands.
fn shell_env(user: Option<String>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> =
        [("PATH", SHELL_PATH), ("LANG", "C.UTF-8"), ("TERM", "dumb")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    if let Some(user) = user {
        env.push(("USER".to_string(), user));
    }
    env
}

fn current_user() -> Option<String> {
    // SAFETY: called while the process has a single thread, so getpwuid's
    // static result is not shared; the name is copied out before returning.
    unsafe {
        let entry = libc::getpwuid(libc::getuid());
        if entry.is_null() || (*entry).pw_name.is_null() {
            return None;
        }
        CStr::from_ptr((*entry).pw_name)
            .to_str()
            .ok()
            .map(str::to_owned)
    }
}
