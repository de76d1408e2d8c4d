//! What the room lets the agent and MCP clients run: the room's policy and
//! its rules ([`policy`], judged by how bash reads a command: [`shell`]),
//! the commands that wait for a writer and the writers' decisions
//! ([`pending`], in the DuetAgent's storage), what the room said of a
//! command ([`consent`]), and the audit of every command run or refused
//! ([`audit`], in the Sandbox object's storage). The policy, the shell
//! reader and the consent are pure; `pending` and `audit` own their
//! tables.

pub mod audit;
pub mod consent;
pub mod pending;
pub mod policy;
pub mod shell;
