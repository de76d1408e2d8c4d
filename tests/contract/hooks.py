"""Schemathesis hooks for the contract run (loaded through SCHEMATHESIS_HOOKS).

Generated `cmd` strings really run in the sandbox, so a valid exec request's
`timeoutMs` is capped at CONTRACT_EXEC_TIMEOUT_MS (default 2000): a generated
command that happens to wait (`sleep`, `cat` of a fifo) then costs seconds,
not the 20 s default. Only values that are already valid are touched, so
negative cases stay negative.

Failures are dropped only where the description cannot say what the worker
does: the lengths of text, userId, an invite's name and a policy's rules
count after trimming; a file's path is refused when its `..` leaves the
workspace, its UTF-8 is longer than 4095 bytes (the schema counts
characters) or one of its names longer than 255, and what a write or a delete meets depends on what the
workspace already holds (a directory where a file goes: 409).
"""

import os
from pathlib import Path

import schemathesis
import yaml

CAP_MS = int(os.environ.get("CONTRACT_EXEC_TIMEOUT_MS", "2000"))

_SCHEMAS = yaml.safe_load((Path(__file__).resolve().parents[2] / "docs/openapi.yaml").read_text(encoding="utf-8"))[
    "components"
]["schemas"]
MAX_TIMEOUT_MS = _SCHEMAS["ExecRequest"]["properties"]["timeoutMs"]["maximum"]
MAX_TEXT = _SCHEMAS["MessageRequest"]["properties"]["text"]["maxLength"]
MAX_USER_ID = _SCHEMAS["MessageRequest"]["properties"]["userId"]["maxLength"]
MAX_NAME = _SCHEMAS["InviteRequest"]["properties"]["name"]["maxLength"]
MAX_CMD = _SCHEMAS["ExecRequest"]["properties"]["cmd"]["maxLength"]
MAX_RULE = _SCHEMAS["Rule"]["maxLength"]
MAX_RULES = _SCHEMAS["RuleList"]["maxItems"]
MODES = _SCHEMAS["AgentCommands"]["enum"]
DECISIONS = _SCHEMAS["DecisionRequest"]["properties"]["decision"]["enum"]


@schemathesis.hook
def before_call(context, case, kwargs):
    if case.operation.method.upper() != "POST" or case.operation.path != "/api/rooms/{roomId}/sandbox/exec":
        return
    body = case.body
    if not isinstance(body, dict):
        return
    timeout = body.get("timeoutMs")
    if timeout is None:
        body["timeoutMs"] = CAP_MS
    elif isinstance(timeout, int) and not isinstance(timeout, bool) and 1 <= timeout <= MAX_TIMEOUT_MS:
        body["timeoutMs"] = min(timeout, CAP_MS)


# Unicode White_Space, what Rust's str::trim removes (str.strip removes more).
WHITE_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
MESSAGE_PATHS = {"/api/rooms/{roomId}/message", "/api/rooms/{roomId}/messages"}
INVITE_PATH = "/api/rooms/{roomId}/invites"
EXEC_PATH = "/api/rooms/{roomId}/sandbox/exec"
POLICY_PATH = "/api/rooms/{roomId}/policy"
DECIDE_PATH = "/api/rooms/{roomId}/approvals/{approvalId}"
# (method, path) of each body with fields measured after trimming.
TRIMMED = {("POST", path) for path in MESSAGE_PATHS} | {
    ("POST", INVITE_PATH),
    ("POST", EXEC_PATH),
    ("PUT", POLICY_PATH),
    ("POST", DECIDE_PATH),
}


def _fits_trimmed(value, required, longest):
    if value is None:
        return not required
    return isinstance(value, str) and 1 <= len(value.strip(WHITE_SPACE)) <= longest


def _rules_fit(body, field):
    # Control characters are refused inside a rule; trimming takes only
    # those that are also White_Space off its ends.
    if field not in body:
        return True
    value = body[field]
    return (
        isinstance(value, list)
        and len(value) <= MAX_RULES
        and all(
            _fits_trimmed(rule, True, MAX_RULE)
            and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in rule.strip(WHITE_SPACE))
            for rule in value
        )
    )


def _valid_after_trimming(path, body):
    """Whether a body is valid by the documented rule, which JSON Schema
    cannot state: a message's `text`, every `userId`, an invite's `name` and
    a policy's rules are measured after trimming."""
    if not isinstance(body, dict):
        return False
    if path in MESSAGE_PATHS:
        return _fits_trimmed(body.get("text"), True, MAX_TEXT) and _fits_trimmed(body.get("userId"), False, MAX_USER_ID)
    if path == EXEC_PATH:
        cmd = body.get("cmd")
        timeout = body.get("timeoutMs")
        return (
            isinstance(cmd, str)
            and 1 <= len(cmd) <= MAX_CMD
            and "\0" not in cmd
            and cmd.strip(WHITE_SPACE) != ""
            and (timeout is None or (isinstance(timeout, int) and not isinstance(timeout, bool) and 1 <= timeout <= MAX_TIMEOUT_MS))
            and _fits_trimmed(body.get("userId"), False, MAX_USER_ID)
        )
    if path == POLICY_PATH:
        mode = body.get("agentCommands", MODES[0])
        return mode in MODES and _rules_fit(body, "allow") and _rules_fit(body, "deny")
    if path == DECIDE_PATH:
        return body.get("decision") in DECISIONS and _fits_trimmed(body.get("userId"), False, MAX_USER_ID)
    return _fits_trimmed(body.get("name"), False, MAX_NAME)


FILES_PATH = "/api/rooms/{roomId}/files"
MAX_PATH_BYTES = 4095


MAX_NAME_BYTES = 255


def _path_refused(path, method):
    """Whether sandboxd refuses a schema-valid path by a rule the schema
    cannot state: `..` that leaves the workspace, too many bytes in it or
    in one of its names (the file system's NAME_MAX), or the workspace
    itself as what a write or a delete names."""
    if not isinstance(path, str):
        return False
    encoded = path.encode("utf-8", "surrogatepass")
    if len(encoded) > MAX_PATH_BYTES or any(len(name) > MAX_NAME_BYTES for name in encoded.split(b"/")):
        return True
    depth = 0
    for part in path.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return depth == 0 and method in ("PUT", "DELETE")


def _files_refusal_expected(case, response):
    if case.operation.path != FILES_PATH or response is None:
        return False
    method = case.operation.method.upper()
    if response.status_code == 409 and method in ("PUT", "DELETE"):
        return True
    path = (case.query or {}).get("path")
    return response.status_code in (400, 409) and _path_refused(path, method)


@schemathesis.hook
def filter_failure(context, failure, case, response):
    if getattr(failure, "code", "") == "ST202" and _files_refusal_expected(case, response):
        return False
    # A "too long" text, userId, name or rule padded with whitespace is valid once trimmed.
    if (
        getattr(failure, "code", "") == "ST201"
        and (case.operation.method.upper(), case.operation.path) in TRIMMED
        and response is not None
        and response.status_code == 200
        and _valid_after_trimming(case.operation.path, case.body)
    ):
        return False
    return True
