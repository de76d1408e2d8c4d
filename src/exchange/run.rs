//! Drives one `/message` exchange (see `exchange::rounds`): asks the model, runs
//! the commands of its answer in the room's sandbox, asks again with their
//! results, until the model is done or a limit is reached, all before the
//! exchange's deadline. Only the first model call's failure fails the
//! exchange; a later one ends it with what was done. A command the sandbox
//! could not run is an outcome like any other, reported to the model and
//! the room.
//!
//! Each command is first put to the room's policy (`approvals::policy`). A denied
//! one is an outcome too ("not run: …"). When one needs a writer's approval,
//! none of that answer's commands run yet, so that they still run in the
//! order written: the exchange pauses, and what it had come to ([`Paused`])
//! is kept by the room with the approvals. Once all are decided, [`resume`]
//! carries on from there, within the same limits of answers and commands,
//! and a fresh time budget.
//!
//! Each answer streams: when anyone watches the room, its visible text goes
//! to the live feed as it comes (`delta` events, see `exchange::shown`), named
//! by the exchange's id and the answer's round. An answer that stops coming
//! before it is done is kept as far as it came, and ends the exchange
//! without running its commands.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde_json::Value;
use worker::Env;

use crate::ai::messages::ChatMessage;
use crate::ai::{self, Answer, Model};
use crate::api::limits::{DELTA_INTERVAL_MS, MAX_MODEL_CALLS, MESSAGE_BUDGET_MS};
use crate::api::shapes::Source;
use crate::api::shapes::{Approval, AuditEntry, AuditOutcome, Message};
use crate::api::{validate, ApiError};
use crate::approvals::audit::{self, Consent};
use crate::approvals::consent::{Hearer, Said};
use crate::approvals::pending::Proposal;
use crate::approvals::policy::{Policy, Verdict};
use crate::exchange::budget::{command_budget, follow_up_call};
use crate::exchange::context;
use crate::exchange::rounds::{self, commands_allowed, FollowUp, Round, Stop};
use crate::exchange::run_tags::Outcome;
use crate::exchange::shown::Shown;
use crate::exchange::tools;
use crate::feed::event::Event;
use crate::room::calls::{Command, Kind, SandboxObject};
use crate::runtime::{clock, random, timeout};

/// What an exchange came to: its rounds and why it ended.
pub struct Exchange {
    pub rounds: Vec<Round>,
    pub stop: Stop,
    /// When it waits for approvals: where to carry on from, and the
    /// waiting answer's commands with what the policy said of each.
    pub paused: Option<(Paused, Vec<Proposal>)>,
}

impl Exchange {
    /// The reply the room sees.
    pub fn reply(&self) -> String {
        rounds::reply(&self.rounds, &self.stop)
    }
}

/// An exchange waiting for approvals, as the room stores it (written by
/// serde, read by [`Paused::read`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Paused {
    /// The exchange's id on the live feed.
    pub exchange: String,
    /// The message it answers, who sent it and when: the model's context
    /// is the history before it, the message, then `follow_ups`.
    pub text: String,
    pub asked_by: Option<String>,
    pub since: i64,
    /// The model's earlier answers, each with what it heard back.
    pub follow_ups: Vec<FollowUp>,
    /// Model answers and commands so far, for the exchange's limits.
    pub calls: usize,
    pub commands_run: usize,
    /// The answer whose commands wait; its commands left out (over an
    /// answer's limit), and over the message's limit.
    pub answer: String,
    /// The waiting answer's tool calls, when it asked through tools (as
    /// `exchange::tools::flatten` stores them).
    pub tool_calls: Vec<String>,
    pub skipped: usize,
    pub not_run: usize,
}

impl Paused {
    /// As the room keeps it.
    pub fn written(&self) -> String {
        serde_json::to_string(self).expect("an exchange serializes")
    }

    /// A stored exchange; `None` if it is not one. Read through a `Value`,
    /// whose reader the upload has anyway, where a derived reader would
    /// cost it several KiB. What older workers left out (the exchange's id,
    /// tool calls) reads as empty.
    pub fn read(json: &str) -> Option<Self> {
        let stored: Value = serde_json::from_str(json).ok()?;
        let text = |key| stored[key].as_str().map(str::to_owned);
        let count = |key| stored[key].as_u64().map(|n| n as usize);
        let strings = |list: &Value| -> Option<Vec<String>> {
            list.as_array()?
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect()
        };
        Some(Self {
            exchange: text("exchange").unwrap_or_default(),
            text: text("text")?,
            asked_by: match &stored["asked_by"] {
                Value::Null => None,
                name => Some(name.as_str()?.to_owned()),
            },
            since: stored["since"].as_i64()?,
            follow_ups: stored["follow_ups"]
                .as_array()?
                .iter()
                .map(|follow_up| strings(follow_up).map(FollowUp::from))
                .collect::<Option<_>>()?,
            calls: count("calls")?,
            commands_run: count("commands_run")?,
            answer: text("answer")?,
            tool_calls: match &stored["tool_calls"] {
                Value::Null => vec![],
                calls => strings(calls)?,
            },
            skipped: count("skipped")?,
            not_run: count("not_run")?,
        })
    }
}

/// One exchange in progress; what it answers and where it stands are its
/// [`Paused`].
struct Run<'a> {
    env: &'a Env,
    room: &'a str,
    sandbox: SandboxObject,
    model: Model,
    policy: &'a Policy,
    history: &'a [Message],
    deadline: u64,
    /// Whether anyone watches the room, so that deltas are worth sending.
    watched: bool,
}

/// Runs the exchange for `user`'s message under `policy`. `still_current`
/// is asked before each command and fails once the room was cleaned up.
pub async fn run(
    env: &Env,
    room: &str,
    history: &[Message],
    user: &Message,
    policy: &Policy,
    watched: bool,
    still_current: impl Fn() -> Result<(), ApiError>,
) -> Result<Exchange, ApiError> {
    let run = Run::new(
        env,
        room,
        policy,
        history,
        user.ts as u64 + MESSAGE_BUDGET_MS,
        watched,
    )?;
    let start = Paused {
        exchange: random::id('x'),
        text: user.text.clone(),
        asked_by: user.user_id.clone(),
        since: user.ts,
        follow_ups: vec![],
        calls: 0,
        commands_run: 0,
        answer: String::new(),
        tool_calls: vec![],
        skipped: 0,
        not_run: 0,
    };
    run.go(start, None, &still_current).await
}

/// Carries on a paused exchange now that its `decided` approvals (in the
/// order of their commands) are; `history` is the room's, before the
/// paused exchange's message.
#[allow(clippy::too_many_arguments)]
pub async fn resume(
    env: &Env,
    room: &str,
    history: &[Message],
    paused: Paused,
    decided: &[Approval],
    policy: &Policy,
    watched: bool,
    still_current: impl Fn() -> Result<(), ApiError>,
) -> Result<Exchange, ApiError> {
    let run = Run::new(
        env,
        room,
        policy,
        history,
        clock::now_ms() + MESSAGE_BUDGET_MS,
        watched,
    )?;
    // The approvals are the waiting answer's commands, in order.
    let calls = tools::unflatten(&paused.tool_calls);
    let (commands, _) = tools::commands(&calls);
    let mut ran = Vec::with_capacity(decided.len());
    for (at, approval) in decided.iter().enumerate() {
        still_current()?;
        // A tag's command is as approved; a call's is read again from it.
        let command = match commands.get(at) {
            Some(command) => command.clone(),
            None => Command::run(&approval.command),
        };
        let said = Said::of_approval(approval, Hearer::Exchange);
        let outcome = run
            .carry_out(&command, said, paused.asked_by.as_deref())
            .await;
        ran.push((command.cmd, outcome));
    }
    let round = Round {
        answer: paused.answer.clone(),
        calls,
        prose: String::new(),
        ran,
        skipped: paused.skipped,
    };
    let mut at = paused;
    at.commands_run += round.ran.len();
    run.go(at, Some(round), &still_current).await
}

impl<'a> Run<'a> {
    fn new(
        env: &'a Env,
        room: &'a str,
        policy: &'a Policy,
        history: &'a [Message],
        deadline: u64,
        watched: bool,
    ) -> Result<Self, ApiError> {
        Ok(Self {
            env,
            room,
            sandbox: SandboxObject::of(env, room)?,
            model: Model::configured(env)?,
            policy,
            history,
            deadline,
            watched,
        })
    }

    /// The exchange's loop, from `at`; `decided` is a round whose commands
    /// were already carried out (a resumed exchange's first).
    ///
    /// Boxed, so that its one body serves a new exchange and a resumed one
    /// rather than being built into both callers.
    fn go<'b>(
        &'b self,
        at: Paused,
        decided: Option<Round>,
        still_current: &'b dyn Fn() -> Result<(), ApiError>,
    ) -> Pin<Box<dyn Future<Output = Result<Exchange, ApiError>> + 'b>> {
        Box::pin(self.go_from(at, decided, still_current))
    }

    async fn go_from(
        &self,
        mut at: Paused,
        mut decided: Option<Round>,
        still_current: &dyn Fn() -> Result<(), ApiError>,
    ) -> Result<Exchange, ApiError> {
        let model_limit = ai::time_limit(self.env);
        let mut rounds: Vec<Round> = vec![];
        let mut paused = None;
        let stop = loop {
            let (round, not_run) = if let Some(round) = decided.take() {
                (round, at.not_run)
            } else {
                let context =
                    context::build(self.history, &at.text, &at.follow_ups, self.model.tools);
                let limit = if at.calls == 0 {
                    MESSAGE_BUDGET_MS
                } else {
                    let left = self.deadline.saturating_sub(clock::now_ms());
                    let Some(limit) = follow_up_call(left, model_limit) else {
                        break Stop::Budget;
                    };
                    limit
                };
                let answer = match self
                    .answer(&context, limit, &at.exchange, at.calls + 1)
                    .await
                {
                    Ok(answer) => answer,
                    Err(e) if at.calls == 0 => return Err(e),
                    Err(e) => break Stop::ModelFailed(e.to_string()),
                };
                at.calls += 1;
                let asked = rounds::asked(&answer.text, &answer.calls);
                let mut round = Round {
                    prose: asked.prose,
                    ran: vec![],
                    skipped: asked.skipped,
                    answer: answer.text,
                    calls: answer.calls,
                };
                if let Some(why) = answer.cut {
                    rounds.push(round);
                    break Stop::Cut(why);
                }
                let mut commands = asked.commands;
                let allowed = commands_allowed(commands.len(), at.commands_run);
                let not_run = commands.len() - allowed;
                commands.truncate(allowed);
                let verdicts: Vec<Verdict> = commands
                    .iter()
                    .map(|command| command.judged(self.policy))
                    .collect();
                if verdicts.contains(&Verdict::Ask) {
                    at.answer = round.answer.clone();
                    at.tool_calls = tools::flatten(&round.calls);
                    at.skipped = round.skipped;
                    at.not_run = not_run;
                    rounds.push(round);
                    let mut proposed = Vec::with_capacity(commands.len());
                    for (command, verdict) in commands.into_iter().zip(verdicts) {
                        let diff = match verdict {
                            Verdict::Ask => self.sandbox.diff(&command, false).await,
                            _ => None,
                        };
                        let command = command.cmd;
                        proposed.push(Proposal {
                            command,
                            verdict,
                            diff,
                        });
                    }
                    paused = Some((at, proposed));
                    // The room numbers the approvals as it keeps them.
                    break Stop::Waiting(vec![]);
                }
                let off = verdicts.contains(&Verdict::Off);
                for (command, verdict) in commands.into_iter().zip(verdicts) {
                    still_current()?;
                    let said = Said::of_verdict(&verdict, Hearer::Exchange);
                    let asked_by = at.asked_by.as_deref();
                    let outcome = self.carry_out(&command, said, asked_by).await;
                    round.ran.push((command.cmd, outcome));
                }
                at.commands_run += allowed;
                if off {
                    rounds.push(round);
                    break Stop::Off;
                }
                (round, not_run)
            };
            let asked_nothing = round.ran.is_empty() && round.calls.is_empty() && not_run == 0;
            let follow_up = FollowUp::of(&round);
            rounds.push(round);
            if asked_nothing {
                break Stop::Done;
            }
            if not_run > 0 {
                break Stop::Commands { not_run };
            }
            if at.calls == MAX_MODEL_CALLS {
                break Stop::ModelCalls;
            }
            at.follow_ups.push(follow_up);
        };
        Ok(Exchange {
            rounds,
            stop,
            paused,
        })
    }

    /// The model's answer to `context` within `limit`; while anyone watches,
    /// its visible text goes to the feed as it comes, at most every
    /// [`DELTA_INTERVAL_MS`] (the first piece at once).
    async fn answer(
        &self,
        context: &[ChatMessage<'_>],
        limit: u64,
        exchange: &str,
        round: usize,
    ) -> Result<Answer, ApiError> {
        let mut arriving = ai::ask(self.env, &self.model, self.room, context, limit).await?;
        // Nobody watching, nothing is kept to show.
        let mut shown = self.watched.then(|| Shown::new(self.model.thinks_inline));
        let mut last = 0;
        while let Some(piece) = arriving.next().await {
            let Some(shown) = shown.as_mut() else {
                continue;
            };
            shown.push(&piece);
            let now = clock::now_ms();
            if now.saturating_sub(last) >= DELTA_INTERVAL_MS {
                if let Some(text) = shown.take(false) {
                    self.delta(exchange, round, &text).await;
                    last = now;
                }
            }
        }
        if let Some(text) = shown.as_mut().and_then(|shown| shown.take(true)) {
            self.delta(exchange, round, &text).await;
        }
        arriving.finish()
    }

    async fn delta(&self, exchange: &str, round: usize, text: &str) {
        let event = Event::Delta {
            exchange,
            round,
            text,
        };
        self.sandbox.publish(&[event]).await;
    }

    /// Runs a command the room let through, or records why it did not;
    /// `asked_by` sent the message it answers.
    async fn carry_out(&self, command: &Command, said: Said, asked_by: Option<&str>) -> Outcome {
        match said {
            Said::Run(consent) => self.run_command(command, &consent, asked_by).await,
            Said::Refused { why, consent } => {
                let (what, tool) = command.audited();
                let entry = audit::entry(
                    clock::now_ms(),
                    what,
                    Source::Agent,
                    asked_by.map(str::to_owned),
                    AuditOutcome::Refused,
                    consent,
                );
                self.sandbox.audit(&AuditEntry { tool, ..entry }).await;
                Outcome::Failed(why)
            }
        }
    }

    /// Runs a command of the model's in the room's sandbox, within the time
    /// limit it asked for if any, or starts, tells of or stops a job; the
    /// whole call ends by the exchange's deadline, container start included.
    async fn run_command(
        &self,
        command: &Command,
        consent: &Consent,
        asked_by: Option<&str>,
    ) -> Outcome {
        if let Err(why) = validate::command(&command.cmd) {
            return Outcome::Failed(format!("command {why}"));
        }
        let left = self.deadline.saturating_sub(clock::now_ms());
        let Some(budget) = command_budget(left) else {
            return Outcome::Failed("not run: the exchange's time budget is spent".into());
        };
        let timeout_ms = command
            .timeout_ms
            .map_or(budget.timeout_ms, |ms| ms.min(budget.timeout_ms));
        let call = self
            .sandbox
            .act(command, timeout_ms, Source::Agent, asked_by, consent);
        match timeout::within(budget.wait_ms, call).await {
            Some(Ok(ran)) => {
                let read = match command.kind {
                    Kind::Run => ran.read().map(Outcome::Ran),
                    Kind::File { .. } => ran.file().map(Outcome::File),
                    _ => ran.read_job().map(Outcome::Job),
                };
                read.unwrap_or_else(Outcome::Failed)
            }
            Some(Err(why)) => Outcome::Failed(why),
            None => Outcome::Failed(format!(
                "the sandbox did not answer within {} ms",
                budget.wait_ms
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paused() -> Paused {
        Paused {
            exchange: "x00ff".into(),
            text: "build it".into(),
            asked_by: Some("ana".into()),
            since: 1_764_400_000_000,
            follow_ups: vec![FollowUp::from(vec![
                "a".into(),
                "results".into(),
                "c1".into(),
                "run_command".into(),
                r#"{"command":"ls"}"#.into(),
                "ls: done".into(),
            ])],
            calls: 2,
            commands_run: 1,
            answer: "b <run>make</run>".into(),
            tool_calls: vec!["c2".into(), "run_command".into(), "{}".into()],
            skipped: 1,
            not_run: 3,
        }
    }

    #[test]
    fn a_paused_exchange_reads_back_as_stored() {
        let stored = serde_json::to_string(&paused()).unwrap();
        assert_eq!(Paused::read(&stored), Some(paused()));
        let unnamed = Paused {
            asked_by: None,
            ..paused()
        };
        assert_eq!(
            Paused::read(&serde_json::to_string(&unnamed).unwrap()),
            Some(unnamed)
        );
    }

    #[test]
    fn one_stored_by_an_older_worker_reads_too_and_a_broken_one_not_at_all() {
        let old = r#"{"text":"t","asked_by":null,"since":5,"follow_ups":[["a <run>ls</run>","[results]"]],
            "calls":1,"commands_run":1,"answer":"x","skipped":0,"not_run":0}"#;
        let read = Paused::read(old).unwrap();
        assert_eq!((read.exchange.as_str(), read.tool_calls.len()), ("", 0));
        assert_eq!(read.follow_ups[0].answer, "a <run>ls</run>");
        assert_eq!(read.follow_ups[0].results, "[results]");
        let mut whole: Value = serde_json::to_value(paused()).unwrap();
        for (key, bad) in [
            ("text", Value::Null),
            ("since", Value::from("soon")),
            ("calls", Value::from(-1)),
            ("follow_ups", Value::from(vec![Value::from(1)])),
            ("tool_calls", Value::from(2)),
            ("asked_by", Value::from(7)),
        ] {
            let kept = whole[key].clone();
            whole[key] = bad;
            assert_eq!(Paused::read(&whole.to_string()), None, "{key}");
            whole[key] = kept;
        }
        assert_eq!(Paused::read("not json"), None);
    }
}
