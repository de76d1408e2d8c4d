# rust:1-slim-bookworm as Docker Hub's official image makes it (Debian's
# slim base, gcc and libc6-dev, a minimal rustup toolchain under
# /usr/local), built here on the imported base because images cannot be
# pulled. The Dockerfile's build stage starts FROM it.
FROM debian:bookworm-slim
ENV RUSTUP_HOME=/usr/local/rustup \
    CARGO_HOME=/usr/local/cargo \
    PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    RUST_VERSION=1.95.0
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl gcc libc6-dev \
    && curl --proto '=https' --tlsv1.2 -sSf -o /tmp/rustup-init \
        https://static.rust-lang.org/rustup/dist/x86_64-unknown-linux-gnu/rustup-init \
    && chmod +x /tmp/rustup-init \
    && /tmp/rustup-init -y --no-modify-path --profile minimal --default-toolchain "$RUST_VERSION" \
        --default-host x86_64-unknown-linux-gnu \
    && rm /tmp/rustup-init \
    && chmod -R a+w "$RUSTUP_HOME" "$CARGO_HOME" \
    && apt-get purge -y --auto-remove curl \
    && rm -rf /var/lib/apt/lists/*
