//! Drives one `/message` exchange (see `chat::rounds`): asks the model, runs
//! the commands of its answer in the room's sandbox, asks again with their
//! results, until the model is done or a limit is reached, all before the
//! exchange's deadline. Only the first model call's failure fails the
//! exchange; a later one ends it with what was done. A command the sandbox
//! could not run is an outcome like any other, reported to the model and
//! the room.

use duet_wire::ExecRequest;
use worker::Env;

use crate::ai;
use crate::api::limits::{MAX_MODEL_CALLS, MESSAGE_BUDGET_MS};
use crate::api::wire::Message;
use crate::api::{validate, ApiError};
use crate::chat::budget::{command_budget, follow_up_call};
use crate::chat::context;
use crate::chat::rounds::{self, commands_allowed, Round, Stop};
use crate::chat::run_tags::{self, Outcome};
use crate::room::calls::SandboxObject;
use crate::runtime::{clock, timeout};

/// What an exchange came to: its rounds and why it ended.
pub struct Exchange {
    pub rounds: Vec<Round>,
    pub stop: Stop,
}

impl Exchange {
    /// The reply the room sees.
    pub fn reply(&self) -> String {
        rounds::reply(&self.rounds, &self.stop)
    }
}

/// Runs the exchange for `text`, started at `started` (epoch ms).
/// `still_current` is asked before each command and fails once the room was
/// cleaned up.
pub async fn run(
    env: &Env,
    room: &str,
    history: &[Message],
    text: &str,
    started: u64,
    still_current: impl Fn() -> Result<(), ApiError>,
) -> Result<Exchange, ApiError> {
    let deadline = started + MESSAGE_BUDGET_MS;
    let model_limit = ai::time_limit(env);
    let sandbox = SandboxObject::of(env, room)?;
    let mut rounds: Vec<Round> = vec![];
    let mut follow_ups: Vec<(String, String)> = vec![];
    let mut commands_run = 0;
    let stop = loop {
        let context = context::build(history, text, &follow_ups);
        let answer = if rounds.is_empty() {
            ai::answer(env, &context, MESSAGE_BUDGET_MS).await?
        } else {
            let left = deadline.saturating_sub(clock::now_ms());
            let Some(limit) = follow_up_call(left, model_limit) else {
                break Stop::Budget;
            };
            match ai::answer(env, &context, limit).await {
                Ok(answer) => answer,
                Err(e) => break Stop::ModelFailed(e.to_string()),
            }
        };
        let parsed = run_tags::parse(&answer);
        let allowed = commands_allowed(parsed.commands.len(), commands_run);
        let mut ran = Vec::with_capacity(allowed);
        for cmd in &parsed.commands[..allowed] {
            still_current()?;
            ran.push((cmd.to_string(), run_command(&sandbox, cmd, deadline).await));
        }
        commands_run += allowed;
        let not_run = parsed.commands.len() - allowed;
        let round = Round {
            prose: parsed.prose,
            ran,
            skipped: parsed.skipped,
            answer,
        };
        let asked_nothing = round.ran.is_empty() && not_run == 0;
        rounds.push(round);
        if asked_nothing {
            break Stop::Done;
        }
        if not_run > 0 {
            break Stop::Commands { not_run };
        }
        if rounds.len() == MAX_MODEL_CALLS {
            break Stop::ModelCalls;
        }
        let last = rounds.last().expect("a round was just added");
        follow_ups.push((last.answer.clone(), rounds::results_turn(last)));
    };
    Ok(Exchange { rounds, stop })
}

/// Runs a command of the model's in the room's sandbox; the whole call ends
/// by `deadline` (epoch ms), container start included.
async fn run_command(sandbox: &SandboxObject, cmd: &str, deadline: u64) -> Outcome {
    if let Err(why) = validate::command(cmd) {
        return Outcome::Failed(format!("command {why}"));
    }
    let left = deadline.saturating_sub(clock::now_ms());
    let Some(budget) = command_budget(left) else {
        return Outcome::Failed("not run: the exchange's time budget is spent".into());
    };
    let request = ExecRequest {
        cmd: cmd.to_owned(),
        timeout_ms: budget.timeout_ms,
    };
    match timeout::within(budget.wait_ms, sandbox.agent_exec(&request)).await {
        Some(Ok(result)) => Outcome::Ran(result),
        Some(Err(why)) => Outcome::Failed(why),
        None => Outcome::Failed(format!(
            "the sandbox did not answer within {} ms",
            budget.wait_ms
        )),
    }
}
