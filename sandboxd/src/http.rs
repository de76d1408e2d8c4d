//! sandboxd's HTTP routes (listed, with their JSON, in the `duet-wire`
//! crate, which the worker shares): what each refuses, and how commands and
//! archives are streamed.
//!
//! Every error is `{"error": "..."}` with the status from [`Error::status`].
//! Both query parameters are optional positive integers.
//!
//! `GET …/archive` answers 413 when the archive would be larger than
//! `maxBytes` or `--max-archive-bytes`, and 422 (`workspace cannot be
//! restored: …`) when a restore would refuse it (more unpacked bytes or
//! entries than the restore bounds, a path too long) or take longer than
//! `--max-restore-ms` by its estimate: nothing is sent then. An archive
//! sent says in its headers how many entries it holds (`x-duet-entries`),
//! the bytes it unpacks to (`x-duet-unpacked-bytes`), both as a restore
//! counts them, and, only if packing left something out (sockets, device
//! files), a one-line ASCII note naming it (`x-duet-left-out`).
//! `PUT …/archive` answers 400 for an archive refused, 413 past a bound,
//! 409 while another restore of the sandbox runs, and 504 (`the restore did
//! not finish within N ms`) once `timeoutMs` has passed since the request
//! came; a restore whose client goes away is given up too, and neither
//! changes the workspace.
//!
//! A streamed command's output is sent as it comes (see [`stream_events`]);
//! its output events add up to the stdout and stderr of its `end`.
//!
//! `POST …/jobs` answers 201 with the job, 409 for an id the sandbox
//! already has, 429 while the sandbox runs `MAX_RUNNING_JOBS`; an unknown
//! job is a 404. A job's output (`?from=N`, 0 by default, at most what it
//! printed so far) is streamed from what is kept to the job's end, each
//! reader on its own.
//!
//! `…/files` is the `files` module's, which says what it refuses.
//!
//! The terminal's routes start it if need be (see `terminal`). Its output
//! (`?from=N`, 0 by default) is streamed from what is kept for as long as
//! the client reads, or until the terminal ends with its sandbox: the body
//! then ends, with no last line. Input is the raw bytes typed, at most
//! `MAX_INPUT_BYTES` (413 past it), and may answer 503 if the terminal takes
//! none of it in time; a size that does not fit is a 400.
//!
//! Archives are streamed both ways: an archive is sent from the file it
//! was built in, and a restore's body is unpacked as it arrives (see
//! `archive`), counted and cut off past `--max-archive-bytes`.

use std::convert::Infallible;
use std::future::Future;
use std::io::{self, Read};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use duet_wire::job::JobRequest;
use duet_wire::stream::{pieces, Event, OUTPUT_EVENT_BYTES};
use duet_wire::terminal::{TerminalSize, MAX_COLS, MAX_INPUT_BYTES, MAX_ROWS};
use duet_wire::{
    ExecRequest, ExecResult, RestoreResult, Route, Stream, ENTRIES_HEADER, LEFT_OUT_HEADER,
    MAX_BYTES, TIMEOUT_MS, UNPACKED_BYTES_HEADER,
};
use http_body_util::channel::{Channel, SendError, Sender};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use crate::abandon::{self, Abandon};
use crate::error::Error;
use crate::files;
use crate::jobs::{self, Reader};
use crate::progress::Progress;
use crate::sandboxes::{validate_name, Sandboxes};
use crate::session::Outcome;
use crate::terminal;
use crate::timestamp::iso8601_millis;

pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Chunks of a streamed body in flight at once.
const CHUNKS_IN_FLIGHT: usize = 8;
const FILE_CHUNK: usize = 64 * 1024;
/// Longest a file's body waits for its client to take the next chunk.
const SEND_STALL: Duration = Duration::from_secs(60);
/// Longest a streamed command's output waits to be sent.
const FLUSH_AFTER: Duration = Duration::from_millis(50);

pub struct App {
    pub sandboxes: Arc<Sandboxes>,
    pub default_timeout_ms: u64,
    pub max_timeout_ms: u64,
    pub max_archive_bytes: u64,
}

/// What `/exec` answers for a command that ran.
fn exec_result(outcome: Outcome, command: String) -> ExecResult {
    ExecResult {
        success: outcome.exit_code == 0 && !outcome.timed_out,
        duration: outcome.duration_ms(),
        stdout: outcome.stdout,
        stderr: outcome.stderr,
        exit_code: outcome.exit_code,
        command,
        timestamp: iso8601_millis(outcome.started),
        truncated: outcome.truncated,
        timed_out: outcome.timed_out,
    }
}

pub type Body = BoxBody<Bytes, Infallible>;

/// Serves HTTP/1.1 (keep-alive included) on one accepted connection.
pub async fn serve_connection(stream: TcpStream, app: Arc<App>) {
    let service = service_fn(move |req| {
        let app = Arc::clone(&app);
        async move { Ok::<_, Infallible>(respond(&app, req).await) }
    });
    // A client hanging up mid-request is routine, not worth a log line.
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

async fn respond(app: &App, req: Request<Incoming>) -> Response<Body> {
    handle(app, req).await.unwrap_or_else(|e| {
        let mut response = json(e.status(), &serde_json::json!({ "error": e.to_string() }));
        match e {
            Error::MethodNotAllowed { allowed, .. } => {
                let allowed = HeaderValue::from_static(allowed);
                response.headers_mut().insert(ALLOW, allowed);
            }
            Error::RangeNotSatisfiable { size } => {
                if let Ok(range) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    response.headers_mut().insert(CONTENT_RANGE, range);
                }
            }
            _ => {}
        }
        response
    })
}

async fn handle(app: &App, req: Request<Incoming>) -> Result<Response<Body>, Error> {
    let path = req.uri().path().to_string();
    let route = Route::parse(&path).ok_or_else(|| Error::NotFound(path.clone()))?;
    let allowed = match route {
        Route::Health => "GET",
        Route::Exec(_) | Route::ExecStream(_) => "POST",
        Route::Archive(_) => "GET, PUT",
        Route::Sandbox(_) => "DELETE",
        Route::Jobs(_) => "GET, POST",
        Route::Job(..) => "GET, DELETE",
        Route::JobOutput(..) => "GET",
        Route::Files(_) => "GET, PUT, DELETE",
        Route::Terminal(_) | Route::TerminalOutput(_) => "GET",
        Route::TerminalInput(_) => "POST",
        Route::TerminalSize(_) => "PUT",
    };
    let method = req.method().as_str();
    if !allowed.split(", ").any(|m| m == method) {
        return Err(Error::MethodNotAllowed {
            method: req.method().to_string(),
            allowed,
        });
    }
    match route {
        Route::Health => Response::builder()
            .header(CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(full("ok"))
            .map_err(|e| Error::Internal(e.to_string())),
        Route::Exec(name) => {
            let (request, timeout) = exec_request(app, req).await?;
            let outcome = app
                .sandboxes
                .exec(name, request.cmd.clone(), timeout, None)
                .await?;
            Ok(json(StatusCode::OK, &exec_result(outcome, request.cmd)))
        }
        Route::ExecStream(name) => exec_stream(app, name, req).await,
        Route::Archive(name) if req.method() == Method::GET => get_archive(app, name, req).await,
        Route::Archive(name) => put_archive(app, name, req).await,
        Route::Sandbox(name) => {
            app.sandboxes.destroy(name).await?;
            Ok(json(
                StatusCode::OK,
                &serde_json::json!({ "destroyed": true }),
            ))
        }
        Route::Jobs(name) if req.method() == Method::POST => {
            let request = parse_job(&read_body(req).await?)?;
            let job = app.sandboxes.start_job(name, request).await?;
            Ok(json(StatusCode::CREATED, &job))
        }
        Route::Jobs(name) => Ok(json(StatusCode::OK, &app.sandboxes.jobs(name)?)),
        Route::Job(name, id) => {
            jobs::validate_id(id)?;
            let job = app.sandboxes.job(name, id)?;
            let info = if req.method() == Method::DELETE {
                job.stop().await
            } else {
                job.info()
            };
            Ok(json(StatusCode::OK, &info))
        }
        Route::JobOutput(name, id) => {
            jobs::validate_id(id)?;
            let from = param(req.uri().query(), "from", 0)?.unwrap_or(0);
            let reader = app.sandboxes.job(name, id)?.reader(from)?;
            let (sender, body) = Channel::new(CHUNKS_IN_FLIGHT);
            tokio::spawn(send_job_events(sender, reader));
            Response::builder()
                .header(CONTENT_TYPE, "application/x-ndjson")
                .body(body.boxed())
                .map_err(|e| Error::Internal(e.to_string()))
        }
        Route::Files(name) => files::handle(&app.sandboxes, name, req).await,
        Route::Terminal(name) => {
            let terminal = app.sandboxes.terminal(name).await?;
            Ok(json(StatusCode::OK, &terminal.screen()))
        }
        Route::TerminalOutput(name) => {
            let from = param(req.uri().query(), "from", 0)?.unwrap_or(0);
            let reader = app.sandboxes.terminal(name).await?.reader(from);
            let (sender, body) = Channel::new(CHUNKS_IN_FLIGHT);
            tokio::spawn(send_terminal_events(sender, reader));
            Response::builder()
                .header(CONTENT_TYPE, "application/x-ndjson")
                .body(body.boxed())
                .map_err(|e| Error::Internal(e.to_string()))
        }
        Route::TerminalInput(name) => {
            validate_name(name)?;
            let typed = read_body_up_to(req, MAX_INPUT_BYTES).await?;
            let terminal = app.sandboxes.terminal(name).await?;
            Ok(json(StatusCode::OK, &terminal.type_in(&typed).await?))
        }
        Route::TerminalSize(name) => {
            validate_name(name)?;
            let size = parse_size(&read_body(req).await?)?;
            app.sandboxes.terminal(name).await?.resize(size)?;
            Ok(json(StatusCode::OK, &size))
        }
    }
}

/// Sends a terminal's output events as its reader gets them, until the
/// terminal ends, the client goes away, or it takes nothing for
/// [`SEND_STALL`].
async fn send_terminal_events(mut body: Sender<Bytes>, mut reader: terminal::Reader) {
    while let Some(event) = reader.next().await {
        let sent = tokio::time::timeout(SEND_STALL, body.send_data(ndjson(&event))).await;
        if !matches!(sent, Ok(Ok(()))) {
            return;
        }
    }
}

/// Sends a job's events as its reader gets them, until its end or until the
/// client goes away (which the job does not notice).
async fn send_job_events(mut body: Sender<Bytes>, mut reader: Reader) {
    while let Some(event) = reader.next().await {
        if body.send_data(ndjson(&event)).await.is_err() {
            return;
        }
    }
}

/// `value` as one NDJSON line.
fn ndjson<T: Serialize>(value: &T) -> Bytes {
    // Serializing these plain values cannot fail.
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    line.into()
}

/// The request of `/exec` and `/exec/stream`, and its timeout.
async fn exec_request(
    app: &App,
    req: Request<Incoming>,
) -> Result<(ExecRequest<Option<u64>>, Duration), Error> {
    let request = parse_exec(&read_body(req).await?)?;
    let timeout_ms = request.timeout_ms.unwrap_or(app.default_timeout_ms);
    if timeout_ms > app.max_timeout_ms {
        return Err(Error::BadRequest(format!(
            "timeoutMs {timeout_ms} exceeds the maximum of {} ms",
            app.max_timeout_ms
        )));
    }
    Ok((request, Duration::from_millis(timeout_ms)))
}

/// A command run as `/exec` runs it, the caller being told its progress.
type Run = Pin<Box<dyn Future<Output = Result<Outcome, Error>> + Send>>;

/// Answers once the command has started, so that a command refused before
/// it starts (no place for a shell, a destroy) gets an ordinary error
/// response; then streams its events.
async fn exec_stream(
    app: &App,
    name: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, Error> {
    let (request, timeout) = exec_request(app, req).await?;
    let progress = Arc::new(Progress::default());
    let mut run: Run = {
        let (sandboxes, progress) = (Arc::clone(&app.sandboxes), Arc::clone(&progress));
        let (name, cmd) = (name.to_string(), request.cmd.clone());
        Box::pin(async move { sandboxes.exec(&name, cmd, timeout, Some(progress)).await })
    };
    let started = loop {
        tokio::select! {
            // The start is told before the command can end.
            biased;
            () = progress.changed() => if let Some(at) = progress.started() {
                break at;
            },
            ran = &mut run => return Err(ran.err().unwrap_or_else(|| {
                Error::Internal("the command ended before it started".into())
            })),
        }
    };
    let (sender, body) = Channel::new(CHUNKS_IN_FLIGHT);
    let body_out = StreamBody {
        body: sender,
        stdout_sent: 0,
        stderr_sent: 0,
    };
    tokio::spawn(stream_events(body_out, request.cmd, started, progress, run));
    Response::builder()
        .header(CONTENT_TYPE, "application/x-ndjson")
        .body(body.boxed())
        .map_err(|e| Error::Internal(e.to_string()))
}

/// Sends the events of a started command: start, its output as it comes
/// (at most [`FLUSH_AFTER`] late, sooner once [`OUTPUT_EVENT_BYTES`] wait), end.
/// If the client goes away this stops, and the command runs on to its end.
async fn stream_events(
    mut body_out: StreamBody,
    command: String,
    started: SystemTime,
    progress: Arc<Progress>,
    mut run: Run,
) {
    let timestamp = iso8601_millis(started);
    let start = Event::Start {
        command: &command,
        timestamp: &timestamp,
    };
    if body_out.send(&start).await.is_err() {
        return;
    }
    // When the oldest output waiting is due; looked at on every wake-up,
    // output that came before this loop included.
    let mut due = None;
    let ran = loop {
        let waiting = progress.waiting();
        if waiting >= OUTPUT_EVENT_BYTES || due.is_some_and(|at| at <= Instant::now()) {
            due = None;
            if body_out.output(progress.take()).await.is_err() {
                return;
            }
        } else if waiting > 0 {
            due.get_or_insert_with(|| Instant::now() + FLUSH_AFTER);
        }
        tokio::select! {
            ran = &mut run => break ran,
            () = progress.changed() => {}
            () = sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {}
        }
    };
    // A command that started always has an outcome.
    let Ok(outcome) = ran else { return };
    let result = exec_result(outcome, command);
    let _ = body_out.finish(progress.take(), &result).await;
}

/// The NDJSON body of a streamed command.
struct StreamBody {
    body: Sender<Bytes>,
    /// Bytes of each stream's text sent so far.
    stdout_sent: usize,
    stderr_sent: usize,
}

impl StreamBody {
    async fn send(&mut self, event: &Event<'_>) -> Result<(), SendError> {
        self.body.send_data(ndjson(event)).await
    }

    async fn output(&mut self, taken: Vec<(Stream, String)>) -> Result<(), SendError> {
        for (stream, text) in taken {
            self.text(stream, &text).await?;
        }
        Ok(())
    }

    /// Sends `text` in events of at most [`OUTPUT_EVENT_BYTES`], cut between
    /// characters.
    async fn text(&mut self, stream: Stream, text: &str) -> Result<(), SendError> {
        for data in pieces(text) {
            let event = Event::Output { stream, data };
            self.send(&event).await?;
            *match stream {
                Stream::Stdout => &mut self.stdout_sent,
                Stream::Stderr => &mut self.stderr_sent,
            } += data.len();
        }
        Ok(())
    }

    /// Sends the output still waiting, then what only the result holds (the
    /// end of the capture, sandboxd's notes), so the output events add up
    /// to the result's stdout and stderr; then the end.
    async fn finish(
        &mut self,
        taken: Vec<(Stream, String)>,
        result: &ExecResult,
    ) -> Result<(), SendError> {
        self.output(taken).await?;
        let stdout = result.stdout.get(self.stdout_sent..).unwrap_or_default();
        self.text(Stream::Stdout, stdout).await?;
        let stderr = result.stderr.get(self.stderr_sent..).unwrap_or_default();
        self.text(Stream::Stderr, stderr).await?;
        self.send(&Event::End(result)).await
    }
}

async fn get_archive(
    app: &App,
    name: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, Error> {
    let cap = match param(req.uri().query(), MAX_BYTES, 1)? {
        Some(asked) => asked.min(app.max_archive_bytes),
        None => app.max_archive_bytes,
    };
    let packed = app.sandboxes.archive(name, cap).await?;
    let mut response = Response::builder()
        .header(CONTENT_TYPE, "application/gzip")
        .header(CONTENT_LENGTH, packed.len)
        .header(ENTRIES_HEADER, packed.entries)
        .header(UNPACKED_BYTES_HEADER, packed.unpacked);
    if let Some(note) = packed.note() {
        response = response.header(LEFT_OUT_HEADER, note);
    }
    response
        .body(send_file(packed.file, packed.len))
        .map_err(|e| Error::Internal(e.to_string()))
}

async fn put_archive(
    app: &App,
    name: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, Error> {
    let timeout_ms = param(req.uri().query(), TIMEOUT_MS, 1)?;
    let limit = app.max_archive_bytes;
    if declared_length(&req).is_some_and(|len| len > limit) {
        return Err(Error::BodyTooLarge { limit });
    }
    let abandon = Abandon::new();
    // Dropped with this handler, which is what a client going away does.
    let _gone = abandon::OnDrop(Arc::clone(&abandon));
    let deadline = async {
        match timeout_ms {
            Some(ms) => abandon.after(ms).await,
            None => std::future::pending().await,
        }
    };
    let (chunks, body) = BodyReader::new();
    let restore = async {
        tokio::join!(
            forward(req.into_body(), chunks, limit, &abandon),
            app.sandboxes.restore(name, body, Arc::clone(&abandon)),
        )
    };
    // The deadline never ends the restore itself, only tells it to stop.
    let (received, restored) = tokio::select! {
        done = restore => done,
        never = deadline => match never {},
    };
    // A body cut off or broken off fails the restore too; say why.
    received?;
    let restored = restored?;
    Ok(json(
        StatusCode::OK,
        &RestoreResult {
            restored: true,
            files: restored.files,
            bytes: restored.bytes,
        },
    ))
}

pub fn declared_length(req: &Request<Incoming>) -> Option<u64> {
    req.headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok())
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, Error> {
    read_body_up_to(req, MAX_BODY_BYTES).await
}

/// The request body, refused past `limit` bytes.
async fn read_body_up_to(req: Request<Incoming>, limit: usize) -> Result<Bytes, Error> {
    let too_large = Error::BodyTooLarge {
        limit: limit as u64,
    };
    if declared_length(&req).is_some_and(|len| len > limit as u64) {
        return Err(too_large);
    }
    match Limited::new(req.into_body(), limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(too_large),
        Err(e) => Err(Error::BadRequest(format!(
            "could not read the request body: {e}"
        ))),
    }
}

fn parse_exec(body: &[u8]) -> Result<ExecRequest<Option<u64>>, Error> {
    let request: ExecRequest<Option<u64>> = serde_json::from_slice(body)
        .map_err(|e| Error::BadRequest(format!("invalid exec request: {e}")))?;
    check_cmd(&request.cmd)?;
    if request.timeout_ms == Some(0) {
        return Err(Error::BadRequest(
            "timeoutMs must be a positive integer".into(),
        ));
    }
    Ok(request)
}

fn parse_job(body: &[u8]) -> Result<JobRequest, Error> {
    let request: JobRequest = serde_json::from_slice(body)
        .map_err(|e| Error::BadRequest(format!("invalid job request: {e}")))?;
    jobs::validate_id(&request.id)?;
    check_cmd(&request.cmd)?;
    if request.max_ms == 0 {
        return Err(Error::BadRequest("maxMs must be a positive integer".into()));
    }
    Ok(request)
}

fn parse_size(body: &[u8]) -> Result<TerminalSize, Error> {
    let size: TerminalSize = serde_json::from_slice(body)
        .map_err(|e| Error::BadRequest(format!("invalid terminal size: {e}")))?;
    if !size.fits() {
        return Err(Error::BadRequest(format!(
            "a terminal has 1 to {MAX_COLS} columns and 1 to {MAX_ROWS} rows"
        )));
    }
    Ok(size)
}

/// Refuses a command bash could not be given.
fn check_cmd(cmd: &str) -> Result<(), Error> {
    if cmd.trim().is_empty() {
        return Err(Error::BadRequest("cmd must not be blank".into()));
    }
    if cmd.contains('\0') {
        return Err(Error::BadRequest(
            "cmd must not contain NUL characters".into(),
        ));
    }
    Ok(())
}

/// The query parameter `name`, the only one the route takes, if given: an
/// integer of at least `least` (0 or 1).
fn param(query: Option<&str>, name: &str, least: u64) -> Result<Option<u64>, Error> {
    let mut value = None;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let given = match pair.split_once('=') {
            Some((key, given)) if key == name => given,
            _ => {
                return Err(Error::BadRequest(format!(
                    "unknown query parameter {pair:?}; only {name} is accepted"
                )))
            }
        };
        let kind = if least == 0 {
            "a non-negative"
        } else {
            "a positive"
        };
        let number = given
            .parse()
            .ok()
            .filter(|n: &u64| *n >= least)
            .ok_or_else(|| Error::BadRequest(format!("{name} must be {kind} integer")))?;
        value = Some(number);
    }
    Ok(value)
}

/// A body of `len` bytes streamed from `file`, from where it stands. A read
/// error ends it short of its Content-Length, which the client sees as a
/// broken response; so does a client that takes nothing for [`SEND_STALL`].
pub fn send_file(file: std::fs::File, len: u64) -> Body {
    let (mut sender, body) = Channel::new(CHUNKS_IN_FLIGHT);
    tokio::spawn(async move {
        let mut file = tokio::fs::File::from_std(file).take(len);
        let mut buf = vec![0; FILE_CHUNK];
        while let Ok(n @ 1..) = file.read(&mut buf).await {
            let sent = sender.send_data(Bytes::copy_from_slice(&buf[..n]));
            if !matches!(tokio::time::timeout(SEND_STALL, sent).await, Ok(Ok(()))) {
                break; // the client is gone, or takes nothing
            }
        }
    });
    body.boxed()
}

/// Passes the request body on to a [`BodyReader`] as it arrives, counting
/// it: past `limit` bytes it stops reading and fails both sides. Once the
/// reader has refused the archive, the rest is still read (up to `limit`),
/// so that the client, still sending, gets the answer; once the restore is
/// given up, reading stops and the reader sees the body end.
async fn forward(
    mut body: Incoming,
    chunks: mpsc::Sender<io::Result<Bytes>>,
    limit: u64,
    abandon: &Abandon,
) -> Result<(), Error> {
    let mut received = 0u64;
    loop {
        let frame = tokio::select! {
            frame = body.frame() => frame,
            _ = abandon.given_up() => return Ok(()),
        };
        let Some(frame) = frame else { break };
        let data = match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue, // trailers
            },
            Err(e) => {
                let _ = chunks
                    .send(Err(io::Error::other("the body broke off")))
                    .await;
                return Err(Error::BadRequest(format!(
                    "could not read the request body: {e}"
                )));
            }
        };
        received += data.len() as u64;
        if received > limit {
            let _ = chunks
                .send(Err(io::Error::other("the body is too large")))
                .await;
            return Err(Error::BodyTooLarge { limit });
        }
        let _ = chunks.send(Ok(data)).await;
    }
    Ok(())
}

/// A request body as a blocking reader, for the thread that unpacks it.
struct BodyReader {
    chunks: mpsc::Receiver<io::Result<Bytes>>,
    chunk: Bytes,
}

impl BodyReader {
    fn new() -> (mpsc::Sender<io::Result<Bytes>>, Self) {
        let (sender, chunks) = mpsc::channel(CHUNKS_IN_FLIGHT);
        let reader = BodyReader {
            chunks,
            chunk: Bytes::new(),
        };
        (sender, reader)
    }
}

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() {
            match self.chunks.blocking_recv() {
                Some(chunk) => self.chunk = chunk?,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed()
}

pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    // Serializing these plain structs cannot fail.
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_query_parameters() {
        assert_eq!(param(None, "maxBytes", 1).ok(), Some(None));
        assert_eq!(param(Some(""), "maxBytes", 1).ok(), Some(None));
        assert_eq!(
            param(Some("maxBytes=10"), "maxBytes", 1).ok(),
            Some(Some(10))
        );
        assert_eq!(
            param(Some("timeoutMs=2500"), "timeoutMs", 1).ok(),
            Some(Some(2500))
        );
        for (bad, name) in [
            ("maxBytes=0", "maxBytes"),
            ("maxBytes=-1", "maxBytes"),
            ("maxBytes=x", "maxBytes"),
            ("maxBytes", "maxBytes"),
            ("max=1", "maxBytes"),
            ("timeoutMs=0", "timeoutMs"),
            ("timeoutMs=1.5", "timeoutMs"),
            // Each route takes its own parameter only.
            ("timeoutMs=10", "maxBytes"),
            ("maxBytes=10", "timeoutMs"),
        ] {
            assert!(
                matches!(param(Some(bad), name, 1), Err(Error::BadRequest(_))),
                "{bad} for {name}"
            );
        }
    }

    #[test]
    fn from_may_be_zero() {
        assert_eq!(param(Some("from=0"), "from", 0).ok(), Some(Some(0)));
        assert!(matches!(
            param(Some("from=-1"), "from", 0),
            Err(Error::BadRequest(msg)) if msg.contains("non-negative")
        ));
    }

    #[test]
    fn rejects_bad_job_requests() {
        let r = parse_job(br#"{"id":"j-1","cmd":"ls","maxMs":5}"#).expect("valid");
        assert_eq!((r.id.as_str(), r.cmd.as_str(), r.max_ms), ("j-1", "ls", 5));
        for (body, needle) in [
            (&br#"{"id":"j","cmd":" ","maxMs":5}"#[..], "blank"),
            (br#"{"id":"j/1","cmd":"ls","maxMs":5}"#, "invalid job id"),
            (br#"{"id":"","cmd":"ls","maxMs":5}"#, "invalid job id"),
            (br#"{"id":"j","cmd":"ls","maxMs":0}"#, "positive"),
            (
                br#"{"id":"j","cmd":"ls","maxMs":-5}"#,
                "invalid job request",
            ),
            (br#"{"id":"j","cmd":"ls"}"#, "missing field"),
            (
                br#"{"id":"j","cmd":"ls","maxMs":5,"cwd":"/"}"#,
                "unknown field",
            ),
        ] {
            match parse_job(body) {
                Err(Error::BadRequest(msg)) => assert!(msg.contains(needle), "{msg}"),
                other => panic!("{} gave {other:?}", String::from_utf8_lossy(body)),
            }
        }
    }

    #[test]
    fn parses_exec_requests() {
        let r = parse_exec(br#"{"cmd":"ls","timeoutMs":5}"#).expect("valid");
        assert_eq!((r.cmd.as_str(), r.timeout_ms), ("ls", Some(5)));
        let r = parse_exec(br#"{"cmd":"ls"}"#).expect("valid");
        assert_eq!(r.timeout_ms, None);
    }

    #[test]
    fn rejects_bad_exec_requests() {
        for (body, needle) in [
            (&br#"{"cmd":"  \n"}"#[..], "blank"),
            (br#"{"cmd":"a\u0000b"}"#, "NUL"),
            (br#"{"cmd":"ls","timeoutMs":0}"#, "positive"),
            (br#"{"cmd":"ls","timeoutMs":-1}"#, "invalid"),
            (br#"{"cmd":"ls","timeoutMs":1.5}"#, "invalid"),
            (br#"{"cmd":1}"#, "invalid"),
            (br#"{"cmd":"ls","cwd":"/"}"#, "unknown field"),
            (br#"{}"#, "missing field"),
            (b"not json", "invalid"),
        ] {
            match parse_exec(body) {
                Err(Error::BadRequest(msg)) => assert!(msg.contains(needle), "{msg}"),
                other => panic!("{} gave {other:?}", String::from_utf8_lossy(body)),
            }
        }
    }
}
