//! Every bound the API enforces, in one place so the README, the OpenAPI
//! description and the code cannot drift apart unnoticed.

/// Largest request body accepted; larger ones are refused with 413 before
/// they are read whole.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Room ids: 1 to this many characters of `[A-Za-z0-9._-]` (UUIDs fit).
pub const MAX_ROOM_ID_CHARS: usize = 128;
/// Longest chat message, in characters: a user's (after trimming), and the
/// agent's reply, which is cut to it (see `exchange::rounds::reply`).
pub const MAX_TEXT_CHARS: usize = 8_000;
/// Longest `userId`, in characters.
pub const MAX_USER_ID_CHARS: usize = 128;
/// Longest shell command, in characters, from a user or from a `<run>` tag.
pub const MAX_CMD_CHARS: usize = 8_000;
/// Messages a room keeps; older ones are forgotten.
pub const HISTORY_LIMIT: usize = 20;
/// Commands run for one model answer; further `<run>` tags are reported, not run.
pub const MAX_RUNS_PER_ANSWER: usize = 5;
/// Model answers per `/message`: the first, and follow-ups that see the
/// results of the commands before them.
pub const MAX_MODEL_CALLS: usize = 4;
/// Commands run per `/message`, over all its answers.
pub const MAX_COMMANDS_PER_MESSAGE: usize = 8;
/// Characters of each output stream of a command that the model sees.
pub const MODEL_OUTPUT_CHARS: usize = 2_000;
/// Characters of a command's output quoted in an agent reply.
pub const SUMMARY_CHARS: usize = 500;
/// Characters of a command quoted in the header of its block in a reply
/// (`Output (<cmd>):`); a longer command is cut there and ends in `…`.
pub const QUOTED_CMD_CHARS: usize = 200;
/// Most characters of stored history sent to the model with a new message
/// (system prompt and new message come on top): the oldest exchanges are
/// left out first, so twenty long messages cannot overflow a small model's
/// context window and leave the room stuck. About 4,000 tokens.
pub const MAX_HISTORY_CONTEXT_CHARS: usize = 16_000;
/// Longest model answer kept, in characters; the rest is cut.
pub const MAX_MODEL_ANSWER_CHARS: usize = 8_000;
/// The live feed gets a model's answer in `delta` events at most this
/// often, each carrying what came since the last: fast enough to read as
/// typing, and at most ten events a second per exchange.
pub const DELTA_INTERVAL_MS: u64 = 100;
/// Time the model may take before the request fails with 504.
pub const AI_TIMEOUT_MS: u64 = 15_000;
/// A whole `/message` exchange (model and commands) ends within this, so the
/// Go server's 30 s deadline holds.
pub const MESSAGE_BUDGET_MS: u64 = 25_000;
/// A command's default time limit in the sandbox.
pub const EXEC_DEFAULT_TIMEOUT_MS: u64 = 20_000;
/// The most a caller may ask for with `timeoutMs`.
pub const EXEC_MAX_TIMEOUT_MS: u64 = 25_000;
/// What a call to sandboxd may take beyond the command's own time limit.
pub const SANDBOXD_MARGIN_MS: u64 = 2_000;
/// What destroying a sandbox (ending its shell, removing its files) may take.
pub const SANDBOX_DESTROY_MS: u64 = 10_000;
/// Time a cold container gets to start answering.
pub const CONTAINER_START_MS: u64 = 10_000;
/// What a cold exec's bound allows for its room's wake (restoring its
/// saved files). The restore itself gets the time its archive needs
/// (`duet_wire::restore_ms`) and goes on past a command that answers first
/// (a retryable 503; see `sandbox::object`).
pub const RESTORE_MS: u64 = 5_000;
/// What a cold sandbox (started, or woken and restored) may add to an exec's
/// own bound of `timeoutMs` + [`SANDBOXD_MARGIN_MS`].
pub const COLD_START_ALLOWANCE_MS: u64 = CONTAINER_START_MS + RESTORE_MS;
/// No exec answers later than this after it arrived, cold or not: the Go
/// server gives up at 30 s.
pub const EXEC_ANSWER_MS: u64 = 28_000;
/// Default `SANDBOX_IDLE_SECONDS`: a sandbox with no command for this long
/// sleeps (files saved, sandbox stopped).
pub const SANDBOX_IDLE_SECONDS: u64 = 600;
/// Default `ROOM_TTL_SECONDS`: a room unused for this long is forgotten.
pub const ROOM_TTL_SECONDS: u64 = 3 * 24 * 3600;
/// Default `SANDBOX_ARCHIVE_MAX_BYTES`: the largest workspace archive
/// (gzipped) a sleeping room keeps.
pub const SANDBOX_ARCHIVE_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Watchers a room's live feed takes at once.
pub const MAX_WATCHERS: usize = 32;
/// Events a watcher may be behind (sent, not acknowledged) before it is
/// dropped as too slow, so that it never slows the room.
pub const MAX_UNACKED_EVENTS: u64 = 256;
/// Events a room's feed log keeps (`FEED_LOG_EVENTS` lowers it); the
/// oldest go first. See `feed::log` for why these bounds.
pub const FEED_LOG_EVENTS: u64 = 2_000;
/// Bytes of events a room's feed log keeps.
pub const FEED_LOG_BYTES: u64 = 1024 * 1024;
/// How much of the terminal's past a watcher joining afresh is given.
pub const RECENT_TERMINAL_BYTES: usize = 64 * 1024;
/// How long a watched command's feed may stay quiet before a heartbeat
/// goes out (`FEED_HEARTBEAT_MS` lowers it): well under the minute after
/// which proxies commonly cut a quiet connection.
pub const HEARTBEAT_MS: u64 = 20_000;
/// The largest frame a watcher may send (its acknowledgements are tiny).
pub const MAX_WATCHER_FRAME_BYTES: usize = 1024;
/// An invite's lifetime when `ttlSeconds` is not given: a day.
pub const INVITE_DEFAULT_TTL_SECONDS: u64 = 24 * 3600;
/// The longest an invite may be made to last: 30 days.
pub const INVITE_MAX_TTL_SECONDS: u64 = 30 * 24 * 3600;
/// Rules in each of a room policy's `allow` and `deny` lists.
pub const MAX_POLICY_RULES: usize = 50;
/// Longest rule of a room policy, in characters.
pub const MAX_RULE_CHARS: usize = 200;
/// Default `DUET_APPROVAL_TIMEOUT_SECONDS`: a command of the agent's that
/// nobody approves within this is denied.
pub const APPROVAL_TIMEOUT_SECONDS: u64 = 600;
/// Entries `GET /audit` answers, newest first.
pub const AUDIT_ENTRIES: usize = 200;
/// Characters of a command the audit keeps.
pub const AUDIT_CMD_CHARS: usize = 500;
/// How long an MCP client's `run_command` waits, in `ask` mode, for a
/// writer's decision before it answers that it expired: with the longest
/// command after it (`EXEC_MAX_TIMEOUT_MS` + `SANDBOXD_MARGIN_MS`), the call
/// answers within 57 s, under the 60 s the official SDKs' clients wait for
/// an answer by default.
pub const MCP_APPROVAL_WAIT_MS: u64 = 30_000;
/// MCP tool calls a room carries out at once (more are refused, as tool
/// errors to try again), and messages one 2025-03-26 batch may hold: the
/// shell is one, and each call may hold it for a command's 25 s.
pub const MAX_MCP_CALLS: usize = 8;
/// Ended jobs a room keeps (the newest started); older ones are forgotten.
pub const ENDED_JOBS_KEPT: usize = 20;
/// The newest output of a job that `GET …/jobs/{jobId}` shows.
pub const JOB_OUTPUT_TAIL_BYTES: usize = 64 * 1024;
/// What the room's log keeps of one job's output: its newest `job_output`
/// events, this many bytes and [`JOB_LOG_EVENTS`] events at most, so that
/// the room's eight jobs together hold at most about half the log.
pub const JOB_LOG_BYTES: u64 = 64 * 1024;
pub const JOB_LOG_EVENTS: u64 = 128;
/// Default `JOB_MAX_SECONDS`: a job's longest life, then sandboxd stops it.
pub const JOB_MAX_SECONDS: u64 = 6 * 3600;
/// The largest file written, or read whole, by `…/files` (this route's own
/// body limit; a larger file is read in parts with `Range`).
pub use duet_wire::file::MAX_FILE_BYTES;
/// How long a file's bytes may take on their way to or from sandboxd:
/// sandboxd gives a body up after a minute (408), and the margin is
/// [`SANDBOXD_MARGIN_MS`].
pub const FILE_TRANSFER_MS: u64 = 60_000 + SANDBOXD_MARGIN_MS;
