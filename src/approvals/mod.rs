//! What the room lets the agent and MCP clients run: the room's policy and
//! its rules ([`policy`], judged by how bash reads a command: [`shell`]),
//! the commands that wait for a writer and the writers' decisions
//! ([`pending`], in the DuetAgent's storage; a decision is told to those
//! waiting for it through [`waiting`]), what the room said of a command
//! and how a refusal is worded ([`consent`]), and the audit of every
//! command run or refused ([`audit`], in the Sandbox object's storage).
//! The policy, the shell reader, the consent and the waiting are pure;
//! `pending` and `audit` own their tables.
//!
//! A command's way through, one type a step: the policy's `Verdict` (run,
//! deny, off, or ask); when asked, an `Approval` (`api::shapes`, the waiting
//! command as the API shows it) until a writer's or the clock's `Decision`;
//! then what the room `Said` (run, or refused and why), whose `Consent`
//! (who or what let it through) goes to the audit.

pub mod audit;
pub mod consent;
pub mod pending;
pub mod policy;
pub mod shell;
pub mod waiting;
