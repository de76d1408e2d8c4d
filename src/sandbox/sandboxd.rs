//! Talking to sandboxd, the program in the sandbox container that keeps one
//! persistent bash per sandbox name. Its protocol (routes and shapes in the
//! `duet_wire` crate, which sandboxd shares):
//!
//! - `GET /health` answers `ok` once it listens;
//! - `POST /v1/sandboxes/{name}/exec` with `{"cmd", "timeoutMs"}` runs one
//!   command and answers the result the public exec route returns;
//! - `DELETE /v1/sandboxes/{name}` ends the shell and removes its files;
//! - `GET /v1/sandboxes/{name}/archive?maxBytes=N` answers the workspace as
//!   a gzipped tar (413 when larger than `N`, 404 when there is none, 422
//!   when a restore would refuse it);
//! - `PUT /v1/sandboxes/{name}/archive?timeoutMs=N` replaces the workspace
//!   with one, or leaves it as it was when the archive is refused or the
//!   restore takes longer than `N`;
//! - `POST /v1/sandboxes/{name}/jobs` starts a job (201), `DELETE …/jobs/{id}`
//!   stops one and answers once it ended, `GET …/jobs/{id}/output?from=N`
//!   streams its output from byte `N`, then its end (`duet_wire::job`); a
//!   job sandboxd does not know is a 404;
//! - `GET|PUT|DELETE /v1/sandboxes/{name}/files?path=P` reads, writes and
//!   deletes the workspace's files (`duet_wire::file`).
//!
//! In production sandboxd runs in this object's container, which is started
//! on demand and polled (with backoff, for at most [`CONTAINER_START_MS`])
//! until it answers. Where there is no container (`wrangler dev` without
//! Docker) the `SANDBOX_URL` var points at a sandboxd run by hand. No call
//! waits longer than the command's own limit plus [`SANDBOXD_MARGIN_MS`].
//!
//! A container is started with explicit options: outbound internet access
//! as `SANDBOX_INTERNET` says (on unless set to off); sandboxd needs no
//! environment (its settings are the image's arguments, and its shells get
//! a fixed environment of their own). The `SANDBOX_URL` path has none of
//! this: that sandboxd's network is its host's.
//!
//! Nothing here awaits the container's exit: the runtime follows it itself
//! (`running()` turns false when the container stops), and a pending wait
//! would keep the object in memory for as long as the container runs. So
//! the object leaves memory between commands, and what keeps the container
//! meanwhile is its inactivity timeout: the runtime keeps a container for
//! that long once its object is gone, then stops it. It is set at start and
//! renewed with use, to `SANDBOX_INACTIVITY_TIMEOUT_SECONDS` (by default the
//! idle time plus [`INACTIVITY_MARGIN_SECONDS`]): the object's own alarm
//! puts the sandbox to sleep first, and a container whose object forgot it
//! is stopped by the runtime soon after.

use std::cell::Cell;
use std::time::Duration;

use duet_wire::job::{JobRequest, STOP_GRACE_MS};
use duet_wire::stream::Line;
use duet_wire::{
    ExecRequest, Route, ENTRIES_HEADER, LEFT_OUT_HEADER, MAX_BYTES, TIMEOUT_MS,
    UNPACKED_BYTES_HEADER,
};
use futures_util::StreamExt;
use serde_json::value::RawValue;
use wasm_bindgen::JsValue;
use worker::{
    web_sys, AbortController, AbortSignal, Container, Delay, Env, Fetch, Headers, Method, Request,
    Response, State,
};

use super::saved::{Packed, CHUNK_BYTES};
use super::stream;
use crate::api::limits::{
    CONTAINER_START_MS, FILE_TRANSFER_MS, SANDBOXD_MARGIN_MS, SANDBOX_DESTROY_MS,
};
use crate::api::ApiError;
use crate::room::clock::write_due;
use crate::runtime::container as platform;
use crate::runtime::outgoing::{self, Parts};
use crate::runtime::{body, clock, config, internal, timeout};

/// Default `SANDBOX_INACTIVITY_TIMEOUT_SECONDS` beyond `SANDBOX_IDLE_SECONDS`:
/// the runtime stops a container whose object is gone this long after the
/// sandbox would have slept. At least the step at which its use is renewed
/// (a minute at most), so an object's own sleep always comes first.
const INACTIVITY_MARGIN_SECONDS: u64 = 60;
/// The port sandboxd listens on in the container (see the Dockerfile).
const PORT: u16 = 8080;
/// Where requests to the container go; only the path matters.
const CONTAINER_ORIGIN: &str = "http://sandboxd";
/// How long a call about the shared terminal may take to be answered.
const TERMINAL_MS: u64 = SANDBOXD_MARGIN_MS;
/// How long renewing the inactivity timeout may take (a call to the
/// runtime, not to the container).
const RENEW_MS: u64 = 1_000;

/// What the Sandbox object knows of its container between requests.
#[derive(Default)]
pub struct ContainerState {
    /// sandboxd answered since the container last started.
    ready: Cell<bool>,
    /// When the inactivity timeout was last set (epoch ms), since the
    /// container last started.
    renewed: Cell<Option<u64>>,
}

enum Place {
    Container(Container),
    Url(String),
}

pub struct Sandboxd<'a> {
    place: Place,
    state: &'a ContainerState,
    env: &'a Env,
    /// The room's idle time, which the container's inactivity timeout outlasts.
    idle_ms: u64,
}

impl<'a> Sandboxd<'a> {
    pub fn locate(
        object: &State,
        env: &'a Env,
        state: &'a ContainerState,
        idle_ms: u64,
    ) -> Result<Self, ApiError> {
        let place = match (object.container(), config::get(env, "SANDBOX_URL")) {
            (Some(container), _) => Place::Container(container),
            (None, Some(url)) => Place::Url(url.trim_end_matches('/').to_owned()),
            (None, None) => {
                return Err(ApiError::SandboxUnavailable(
                    "no container here (containers need Docker or Cloudflare) and SANDBOX_URL is not set; \
                     start sandboxd and set SANDBOX_URL to its address"
                        .into(),
                ))
            }
        };
        Ok(Self {
            place,
            state,
            env,
            idle_ms,
        })
    }

    /// Runs one command in a started sandbox; sandboxd's answer comes back as
    /// it was sent, checked to be a JSON object but not rebuilt.
    pub async fn exec(&self, name: &str, request: &ExecRequest) -> Result<Box<RawValue>, ApiError> {
        let (response, _) = self.post_command(Route::Exec(name), request).await?;
        let unexpected = |why: String| {
            ApiError::SandboxFailed(format!("unexpected answer from sandboxd: {why}"))
        };
        let bytes = body::all_of(response)
            .await
            .map_err(|e| unexpected(worker::Error::from(e).to_string()))?;
        let text = String::from_utf8(bytes).map_err(|e| unexpected(e.to_string()))?;
        // Checked in place: the (up to megabytes of) text is not copied.
        let raw = RawValue::from_string(text).map_err(|e| unexpected(e.to_string()))?;
        if !raw.get().starts_with('{') {
            return Err(unexpected("not a JSON object".into()));
        }
        Ok(raw)
    }

    /// Runs one command like [`Self::exec`], handing each piece of output
    /// to `output(stream, data)` as sandboxd streams it; answers the same
    /// result `/exec` would.
    pub async fn exec_streaming(
        &self,
        name: &str,
        request: &ExecRequest,
        mut output: impl FnMut(&str, &str),
    ) -> Result<Box<RawValue>, ApiError> {
        let started = clock::now_ms();
        let (mut response, limit) = self.post_command(Route::ExecStream(name), request).await?;
        let failed = |why: String| ApiError::SandboxFailed(format!("sandboxd's stream: {why}"));
        let reading = async {
            let mut chunks = response.stream()?;
            let mut lines = stream::Lines::default();
            while let Some(chunk) = chunks.next().await {
                for line in lines.feed(&chunk?) {
                    match stream::parse(&line).map_err(failed)? {
                        Line::Start => {}
                        Line::Output { stream, data } => output(stream.name(), &data),
                        Line::End(result) => {
                            return RawValue::from_string(result).map_err(|e| failed(e.to_string()))
                        }
                    }
                }
            }
            Err(failed("it ended before the command did".into()))
        };
        let left = limit.saturating_sub(clock::now_ms() - started).max(1);
        timeout::within(left, reading)
            .await
            .ok_or(ApiError::SandboxTimeout(limit))?
    }

    /// Sends a command to sandboxd's `route` (exec or its stream); answers
    /// the response and the bound it was given: the command's limit plus
    /// [`SANDBOXD_MARGIN_MS`].
    async fn post_command(
        &self,
        route: Route<'_>,
        request: &ExecRequest,
    ) -> Result<(Response, u64), ApiError> {
        let body = serde_json::to_string(request).map_err(|e| ApiError::Internal(e.to_string()))?;
        let limit = request.timeout_ms + SANDBOXD_MARGIN_MS;
        let path = route.to_string();
        let response = self
            .call(Method::Post, &path, Some(JsValue::from_str(&body)), limit)
            .await?;
        Ok((response, limit))
    }

    /// Starts a job (`POST` on [`Route::Jobs`], with its request) or stops
    /// one (`DELETE` on [`Route::Job`]: SIGTERM, then SIGKILL after
    /// [`STOP_GRACE_MS`]); answers sandboxd's `JobInfo`, once it started or
    /// ended.
    pub async fn job(
        &self,
        method: Method,
        route: Route<'_>,
        request: Option<&JobRequest>,
    ) -> Result<serde_json::Value, ApiError> {
        let body = request.map(|r| {
            JsValue::from_str(&serde_json::to_string(r).expect("a job request serializes"))
        });
        let limit = STOP_GRACE_MS + SANDBOXD_MARGIN_MS;
        let mut info = self.call(method, &route.to_string(), body, limit).await?;
        info.json()
            .await
            .map_err(|e| ApiError::SandboxFailed(format!("unexpected answer from sandboxd: {e}")))
    }

    /// A job's output stream from byte `from` of its output, once sandboxd
    /// answers; the stream itself lasts as long as the job.
    pub async fn job_output(&self, name: &str, id: &str, from: u64) -> Result<Response, ApiError> {
        let path = format!("{}?from={from}", Route::JobOutput(name, id));
        self.call(Method::Get, &path, None, SANDBOXD_MARGIN_MS)
            .await
    }

    /// The shared terminal's screen (`duet_wire::terminal::Screen`),
    /// starting the terminal if it has none; read through a `Value`.
    pub async fn terminal_screen(&self, name: &str) -> Result<serde_json::Value, ApiError> {
        let path = Route::Terminal(name).to_string();
        let mut screen = self.call(Method::Get, &path, None, TERMINAL_MS).await?;
        screen
            .json()
            .await
            .map_err(|e| ApiError::SandboxFailed(format!("unexpected screen from sandboxd: {e}")))
    }

    /// The terminal's output stream from byte `from`, once sandboxd answers;
    /// the stream itself lasts until `signal`'s controller ends it, or the
    /// connection does.
    pub async fn terminal_output(
        &self,
        name: &str,
        from: u64,
        signal: &AbortSignal,
    ) -> Result<Response, ApiError> {
        let path = format!("{}?from={from}", Route::TerminalOutput(name));
        let sent = self.send_until(signal, Method::Get, &path, None, None, TERMINAL_MS);
        match sent.await {
            Some(Ok(response)) if response.status_code() == 200 => Ok(response),
            Some(Ok(response)) => Err(refused(response).await),
            Some(Err(e)) => Err(ApiError::SandboxFailed(format!(
                "cannot reach sandboxd: {e}"
            ))),
            None => Err(ApiError::SandboxTimeout(TERMINAL_MS)),
        }
    }

    /// Writes `keys` to the terminal; answers whether it echoed them.
    pub async fn terminal_input(&self, name: &str, keys: &str) -> Result<bool, ApiError> {
        let path = Route::TerminalInput(name).to_string();
        let body = Some(JsValue::from_str(keys));
        let mut typed = self.call(Method::Post, &path, body, TERMINAL_MS).await?;
        let typed: serde_json::Value = typed.json().await.unwrap_or_default();
        Ok(typed["echo"] != false)
    }

    /// Sizes the terminal (`duet_wire::terminal::TerminalSize`).
    pub async fn terminal_size(&self, name: &str, cols: u16, rows: u16) -> Result<(), ApiError> {
        let path = Route::TerminalSize(name).to_string();
        let body = format!(r#"{{"cols":{cols},"rows":{rows}}}"#);
        let body = Some(JsValue::from_str(&body));
        self.call(Method::Put, &path, body, TERMINAL_MS).await?;
        Ok(())
    }

    /// Whether the container is down: nothing started in it runs any more.
    pub fn down(&self) -> bool {
        matches!(&self.place, Place::Container(c) if !c.running())
    }

    pub async fn destroy(&self, name: &str) -> Result<(), ApiError> {
        if let Place::Container(container) = &self.place {
            // The container's disk goes with it: nothing of the room survives.
            // workerd destroys only a container it runs; one that stopped
            // (and may be restarted by the engine, files and all) is
            // replaced by a fresh one first, which removes it.
            if !container.running() {
                self.launch(container).map_err(|e| {
                    ApiError::SandboxFailed(format!(
                        "the stopped container could not be removed: {e}"
                    ))
                })?;
            }
            return self.stop(container).await;
        }
        let path = Route::Sandbox(name).to_string();
        self.call(Method::Delete, &path, None, SANDBOX_DESTROY_MS)
            .await?;
        Ok(())
    }

    /// Streams the workspace of `name`, as a gzipped tar of at most
    /// `max_bytes`, into `keep` chunk by chunk; answers the bytes kept, or
    /// what stopped it. Nothing is kept whole in memory.
    pub async fn save(
        &self,
        name: &str,
        max_bytes: u64,
        limit_ms: u64,
        mut keep: impl FnMut(Vec<u8>) -> worker::Result<()>,
    ) -> Result<Saving, ApiError> {
        if self.down() {
            return Ok(Saving::Nothing);
        }
        let path = format!("{}?{MAX_BYTES}={max_bytes}", Route::Archive(name));
        let saving = async {
            let mut response = match self
                .send_within(Method::Get, &path, None, None, limit_ms)
                .await
            {
                Some(Ok(response)) => response,
                Some(Err(e)) => {
                    return Err(ApiError::SandboxFailed(format!(
                        "cannot reach sandboxd: {e}"
                    )))
                }
                None => return Err(ApiError::SandboxTimeout(limit_ms)),
            };
            match response.status_code() {
                200 => {}
                404 => return Ok(Saving::Nothing),
                413 => return Ok(Saving::TooLarge),
                422 => return Ok(Saving::Unrestorable(internal::error_of(response).await)),
                status => {
                    let why = internal::error_of(response).await;
                    return Err(ApiError::SandboxFailed(format!(
                        "sandboxd answered {status} to the archive: {why}"
                    )));
                }
            }
            let packed = packed_of(&response);
            let mut stream = response.stream()?;
            let mut chunk = Vec::with_capacity(CHUNK_BYTES);
            let mut total = 0u64;
            while let Some(bytes) = stream.next().await {
                let bytes = bytes?;
                total += bytes.len() as u64;
                if total > max_bytes {
                    return Ok(Saving::TooLarge);
                }
                for piece in bytes.chunks(CHUNK_BYTES) {
                    let room = CHUNK_BYTES - chunk.len();
                    let (now, later) = piece.split_at(piece.len().min(room));
                    chunk.extend_from_slice(now);
                    if chunk.len() == CHUNK_BYTES {
                        keep(std::mem::replace(
                            &mut chunk,
                            Vec::with_capacity(CHUNK_BYTES),
                        ))?;
                    }
                    chunk.extend_from_slice(later);
                }
            }
            if !chunk.is_empty() {
                keep(chunk)?;
            }
            Ok(Saving::Saved(packed))
        };
        timeout::within(limit_ms, saving)
            .await
            .ok_or(ApiError::SandboxTimeout(limit_ms))?
    }

    /// Replaces the workspace of a started sandbox with `archive`, within
    /// `limit_ms`. sandboxd gets a little less time than this call waits, so
    /// that it gives up first and says so; a restore it gives up on (or
    /// whose caller went away) leaves the workspace as it was.
    pub async fn restore(
        &self,
        name: &str,
        archive: web_sys::Blob,
        limit_ms: u64,
    ) -> Result<Restore, ApiError> {
        let sandboxd_ms = limit_ms.saturating_sub(RESTORE_ANSWER_MS).max(1);
        let path = format!("{}?{TIMEOUT_MS}={sandboxd_ms}", Route::Archive(name));
        let response = match self
            .send_within(Method::Put, &path, Some(archive.into()), None, limit_ms)
            .await
        {
            Some(Ok(response)) => response,
            Some(Err(e)) => {
                self.state.ready.set(false);
                return Err(ApiError::SandboxFailed(format!(
                    "cannot reach sandboxd: {e}"
                )));
            }
            None => {
                self.state.ready.set(false);
                return Ok(Restore::TooSlow(format!(
                    "sandboxd did not finish the restore within {limit_ms} ms"
                )));
            }
        };
        match response.status_code() {
            200 => Ok(Restore::Done),
            // Refused (bad, too large, unrestorable): the archive itself
            // cannot come back, now or on a later try.
            400 | 413 | 422 => Ok(Restore::Refused(internal::error_of(response).await)),
            504 => Ok(Restore::TooSlow(internal::error_of(response).await)),
            status => {
                let why = internal::error_of(response).await;
                Err(ApiError::SandboxUnavailable(format!(
                    "sandboxd answered {status} to the restore: {why}"
                )))
            }
        }
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<JsValue>,
        limit_ms: u64,
    ) -> Result<Response, ApiError> {
        let response = match self.send_within(method, path, body, None, limit_ms).await {
            Some(Ok(response)) => response,
            outcome => {
                // A silent or broken sandboxd is checked afresh next time.
                self.state.ready.set(false);
                return Err(match outcome {
                    Some(Err(e)) => ApiError::SandboxFailed(format!("cannot reach sandboxd: {e}")),
                    _ => ApiError::SandboxTimeout(limit_ms),
                });
            }
        };
        match response.status_code() {
            200 | 201 => Ok(response),
            _ => Err(refused(response).await),
        }
    }

    /// A request of the files route (`duet_wire::file`): `query` names the
    /// path, `range` a part to read, `body` a file's bytes (streamed);
    /// answers sandboxd's answer with its body unread, so a file's bytes
    /// stream through. sandboxd's refusals of a path or a body (`{"error"}`,
    /// with the statuses the wire names) are the caller's to see, as they
    /// are.
    pub async fn files(
        &self,
        method: Method,
        name: &str,
        query: &str,
        range: Option<&str>,
        body: Option<JsValue>,
    ) -> Result<Response, ApiError> {
        let path = format!("{}?{query}", Route::Files(name));
        let headers = Headers::new();
        if let Some(range) = range {
            headers.set("range", range)?;
        }
        let response = self
            .send_within(method, &path, body, Some(&headers), FILE_TRANSFER_MS)
            .await
            .ok_or(ApiError::SandboxTimeout(FILE_TRANSFER_MS))?
            .map_err(|e| ApiError::SandboxFailed(format!("cannot reach sandboxd: {e}")))?;
        match response.status_code() {
            200 | 206 | 400 | 403 | 404 | 408 | 409 | 413 | 416 => Ok(response),
            _ => Err(refused(response).await),
        }
    }

    async fn send_within(
        &self,
        method: Method,
        path: &str,
        body: Option<JsValue>,
        headers: Option<&Headers>,
        limit_ms: u64,
    ) -> Option<worker::Result<Response>> {
        let controller = AbortController::default();
        let outcome = self
            .send_until(&controller.signal(), method, path, body, headers, limit_ms)
            .await;
        if outcome.is_none() {
            controller.abort();
        }
        outcome
    }

    /// As [`Self::send_within`], with the `signal` of a controller of the
    /// caller's, which can end the request, its answer's body included, at
    /// any time.
    async fn send_until(
        &self,
        signal: &AbortSignal,
        method: Method,
        path: &str,
        body: Option<JsValue>,
        headers: Option<&Headers>,
        limit_ms: u64,
    ) -> Option<worker::Result<Response>> {
        let send = async {
            let request = self.request(method, path, body, headers, signal)?;
            match &self.place {
                Place::Container(container) => {
                    container.get_tcp_port(PORT)?.fetch_request(request).await
                }
                // `send` alone would pass a null signal that overrides the request's.
                Place::Url(_) => Fetch::Request(request).send_with_signal(signal).await,
            }
        };
        timeout::within(limit_ms, send).await
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<JsValue>,
        headers: Option<&Headers>,
        signal: &AbortSignal,
    ) -> worker::Result<Request> {
        let url = match &self.place {
            Place::Container(_) => format!("{CONTAINER_ORIGIN}{path}"),
            Place::Url(base) => format!("{base}{path}"),
        };
        let parts = Parts {
            headers,
            body: body.as_ref(),
            signal: Some(signal),
        };
        outgoing::request(method, &url, parts)
    }

    /// Whether a command now would have to wait for a container to start.
    pub fn is_cold(&self) -> bool {
        match &self.place {
            Place::Container(container) => !(self.state.ready.get() && container.running()),
            Place::Url(_) => false,
        }
    }

    /// Starts the container if needed and waits until sandboxd answers, for
    /// at most [`CONTAINER_START_MS`] and never past `deadline` (epoch ms).
    /// A container that runs but never answers is destroyed, so the next
    /// call starts a fresh one. Renews the inactivity timeout when due.
    pub async fn start(&self, deadline: u64) -> Result<(), ApiError> {
        let Place::Container(container) = &self.place else {
            return Ok(());
        };
        if self.state.ready.get() && container.running() {
            self.keep(container).await;
            return Ok(());
        }
        if !container.running() {
            self.launch(container).map_err(|e| {
                ApiError::SandboxUnavailable(format!("the container could not be started: {e}"))
            })?;
        }
        self.keep(container).await;
        let started = clock::now_ms();
        let deadline = deadline.min(started + CONTAINER_START_MS);
        let mut pauses = start_pauses();
        while clock::now_ms() < deadline {
            if !container.running() {
                return Err(ApiError::SandboxUnavailable(
                    "the container stopped while starting".into(),
                ));
            }
            let health = self
                .send_within(Method::Get, &Route::Health.to_string(), None, None, 1_000)
                .await;
            if matches!(health, Some(Ok(ref r)) if r.status_code() == 200) {
                self.state.ready.set(true);
                return Ok(());
            }
            let pause = pauses.next().unwrap_or(MAX_START_PAUSE_MS);
            Delay::from(Duration::from_millis(pause)).await;
        }
        self.stop(container).await?;
        Err(ApiError::SandboxUnavailable(format!(
            "the container did not answer within {} ms",
            deadline - started
        )))
    }

    /// Starts the container, with outbound internet access as
    /// `SANDBOX_INTERNET` says; answers why not.
    fn launch(&self, container: &Container) -> Result<(), String> {
        let internet = config::switch(self.env, "SANDBOX_INTERNET", true)?;
        platform::start(container, internet).map_err(|e| e.to_string())?;
        self.state.ready.set(false);
        self.state.renewed.set(None);
        Ok(())
    }

    /// Sets the container's inactivity timeout when it was not set since the
    /// container started, or its last setting is as old as the step at
    /// which a room's last use is written ([`write_due`] for the idle time):
    /// the container is then kept for at least the idle time after its last
    /// use. A failure is retried with the next command; the room works on.
    async fn keep(&self, container: &Container) {
        let idle_ms = self.idle_ms;
        let now = clock::now_ms();
        if !write_due(self.state.renewed.get(), now, idle_ms) {
            return;
        }
        let timeout_ms = config::seconds_as_ms(
            self.env,
            "SANDBOX_INACTIVITY_TIMEOUT_SECONDS",
            idle_ms / 1000 + INACTIVITY_MARGIN_SECONDS,
        );
        let renewing = platform::set_inactivity_timeout(container, timeout_ms);
        if let Some(Ok(())) = timeout::within(RENEW_MS, renewing).await {
            self.state.renewed.set(Some(now));
        }
    }

    /// Destroys the container, and waits (boundedly) until the runtime knows
    /// it is gone.
    async fn stop(&self, container: &Container) -> Result<(), ApiError> {
        if container.running() {
            let destroyed = timeout::within(SANDBOX_DESTROY_MS, container.destroy(None))
                .await
                .ok_or(ApiError::SandboxTimeout(SANDBOX_DESTROY_MS))?;
            destroyed.map_err(|e| {
                ApiError::SandboxFailed(format!("the container could not be destroyed: {e}"))
            })?;
            let _ = timeout::within(SANDBOX_DESTROY_MS, container.wait_for_exit()).await;
        }
        self.state.ready.set(false);
        Ok(())
    }
}

/// What became of saving a workspace.
#[derive(Debug, PartialEq, Eq)]
pub enum Saving {
    /// The archive was kept.
    Saved(Packed),
    /// There was no workspace (or no running container) to save.
    Nothing,
    /// The archive was over the cap; whatever was kept of it is to be dropped.
    TooLarge,
    /// sandboxd would not restore this workspace (too many entries, too
    /// large unpacked, too slow to bring back), so it must not sleep; why.
    Unrestorable(String),
}

/// What sandboxd's answer to an archive's download says it holds.
fn packed_of(response: &Response) -> Packed {
    let header = |name| response.headers().get(name).ok().flatten();
    let number = |name| header(name).and_then(|n| n.trim().parse().ok());
    Packed {
        entries: number(ENTRIES_HEADER),
        unpacked: number(UNPACKED_BYTES_HEADER),
        left_out: header(LEFT_OUT_HEADER),
    }
}

/// What became of restoring a workspace that sandboxd could be asked to
/// restore.
#[derive(Debug, PartialEq, Eq)]
pub enum Restore {
    Done,
    /// The archive was refused, by its content or a bound of this sandboxd:
    /// it cannot come back, now or later; why. The workspace is as it was
    /// before (empty, in a fresh sandbox).
    Refused(String),
    /// The restore did not finish in its time and was given up; the archive
    /// may still come back on another try; why.
    TooSlow(String),
}

/// How long before the worker's own bound sandboxd gives up a restore, so
/// its answer (and the reason) still arrives: sandboxd removes what it had
/// unpacked before it answers, which takes up to about a second at its
/// bound of entries.
pub const RESTORE_ANSWER_MS: u64 = 1_500;

/// The longest pause between two health checks of a starting container.
const MAX_START_PAUSE_MS: u64 = 1_000;

/// Pauses between health checks of a starting container: 50 ms, doubling up
/// to [`MAX_START_PAUSE_MS`], so a fast start is seen at once and a slow one
/// is not polled hard.
fn start_pauses() -> impl Iterator<Item = u64> {
    std::iter::successors(Some(50), |pause| Some((pause * 2).min(MAX_START_PAUSE_MS)))
}

/// What an answer of sandboxd's other than a success means to the caller.
/// 503: sandboxd is at its cap of shells; try again later. Only a job's
/// routes name something sandboxd may not know.
async fn refused(response: Response) -> ApiError {
    let status = response.status_code();
    let why = internal::error_of(response).await;
    let why = format!("sandboxd answered {status}: {why}");
    match status {
        404 => ApiError::NoSuchJob,
        429 => ApiError::TooManyJobs,
        503 => ApiError::SandboxUnavailable(why),
        _ => ApiError::SandboxFailed(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_pauses_double_up_to_a_second() {
        let pauses: Vec<u64> = start_pauses().take(8).collect();
        assert_eq!(pauses, [50, 100, 200, 400, 800, 1_000, 1_000, 1_000]);
    }

    #[test]
    fn polling_a_slow_start_stays_within_the_start_bound() {
        // Pauses alone (health checks come on top) until the bound is spent.
        let mut spent = 0;
        let checks = start_pauses()
            .take_while(|pause| {
                spent += pause;
                spent <= CONTAINER_START_MS
            })
            .count();
        assert!(
            (8..=16).contains(&checks),
            "{checks} checks in {CONTAINER_START_MS} ms"
        );
    }
}
