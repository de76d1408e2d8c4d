//! Integration tests: the real sandboxd binary driving real bash.

mod api;
mod archive;
mod breakage;
mod files;
mod harness;
mod jobs;
mod kept;
mod limits;
mod shell;
mod stream;
mod terminal;
mod wake;
