# Duet sandbox image: the shared shell of a Duet room.
#
# Runs sandboxd, which keeps one persistent bash session per sandbox name,
# each in its own directory under /workspace, and serves them over HTTP/JSON
# on port 8080. The worker's Sandbox Durable Object talks to that port.
#
# Build from the repository root: docker build -t duet-sandbox .

FROM rust:1-slim-bookworm AS build
WORKDIR /src
# Cargo loads the whole workspace, so the worker package's manifest and
# sources come along; only sandboxd is compiled.
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY sandboxd ./sandboxd
RUN cargo build --release -p sandboxd --locked \
    && install -m 0755 target/release/sandboxd /usr/local/bin/sandboxd

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        bash ca-certificates coreutils curl git python3 tini \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --shell /bin/bash sandbox \
    && mkdir /workspace \
    && chown sandbox:sandbox /workspace
COPY --from=build /usr/local/bin/sandboxd /usr/local/bin/sandboxd
USER sandbox
WORKDIR /workspace
EXPOSE 8080
# tini is PID 1: it forwards SIGTERM to sandboxd and reaps orphaned
# processes of the shells.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sandboxd", "--listen", "0.0.0.0:8080", "--root", "/workspace", "--max-procs", "512"]
