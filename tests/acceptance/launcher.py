#!/usr/bin/env python3
"""A launcher written from relay's documented protocol alone (docs/DESIGN.md: the shim's flags,
status lines and environment table; README: `relay-host launch --json` and its answers), stdlib
only. It drives the real relay-shim and relay-host, checks every row of DESIGN.md's environment
table for relay-shim and each answer relay-host gives, and prints every answer line it read (one
JSON object a line) so its caller can check them against docs/schema/.

usage: launcher.py  (paths come from the environment: RELAY_SHIM, RELAY_HOST, FAKE_AGENT,
CONFIG_DIR, STATE_DIR, HOME, PROJECT, FAKE_AGENT_RECORD)
Exit 0 when every check holds; otherwise the first failed check on stderr, exit 1.
"""
import fcntl
import hashlib
import json
import os
import subprocess
import sys

ENV = os.environ
TOKEN = "sk-ant-oat01-acceptance-" + os.urandom(12).hex()
CREDENTIALS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-MARKER",
    "ANTHROPIC_AUTH_TOKEN": "MARKER-auth",
    "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-MARKER",
    "CLAUDECODE": "1",
}
SETTINGS = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ACCEPTANCE_KEEP": "kept"}
answers = []


def check(cond, what):
    if not cond:
        sys.stderr.write("acceptance: " + what + "\n")
        sys.exit(1)


def records():
    with open(ENV["FAKE_AGENT_RECORD"]) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    os.remove(ENV["FAKE_AGENT_RECORD"])
    return lines


def shim(flags, token, extra_env):
    """relay-shim FLAGS -- fake-agent, status pipe at 3, the token pipe at 5 when given."""
    status_r, status_w = os.pipe()
    fds = {3: status_w}
    if token is not None:
        r, w = os.pipe()
        os.write(w, token.encode())
        os.close(w)  # the write end closed: the reader gets EOF
        fds[5] = r
    env = {"PATH": "/usr/bin:/bin", "FAKE_AGENT_RECORD": ENV["FAKE_AGENT_RECORD"]}
    env.update(extra_env)

    def place():
        # Out of the way first, so no placement clobbers a source still to be placed.
        high = {n: fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for n, fd in fds.items()}
        for n, fd in high.items():
            os.dup2(fd, n)  # the copy is inheritable
            os.close(fd)

    # pass_fds keeps exactly these numbers open in the child; every other one is closed.
    p = subprocess.Popen([ENV["RELAY_SHIM"]] + flags + ["--", ENV["FAKE_AGENT"]], env=env,
                         preexec_fn=place, pass_fds=tuple(fds), stdin=subprocess.DEVNULL)
    for fd in fds.values():
        os.close(fd)
    with os.fdopen(status_r) as f:
        status = [json.loads(l) for l in f]
    check(p.wait() == 0, "relay-shim %s exited %s" % (flags, p.returncode))
    return status, records()[0]


def shim_rows():
    inherited = dict(CREDENTIALS, **SETTINGS)
    inherited["CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR"] = "5"
    sha = hashlib.sha256(TOKEN.encode()).hexdigest()
    # Row: relay-shim --pass-token.
    status, rec = shim(["--pass-token"], TOKEN, inherited)
    check([s["event"] for s in status] == ["no_identity", "started", "exit"], "status %s" % status)
    check(status[1]["pid"] == rec["pid"] and status[2] == {"event": "exit", "status": 0}, "status")
    check(rec["fds"] == [0, 1, 2, 5], "--pass-token: fds %s" % rec["fds"])
    check(rec.get("token_sha256") == sha, "--pass-token: not the token on fd 5")
    env = rec["env"]
    check(env.get("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR") == "5", "--pass-token: the variable")
    for k in CREDENTIALS:
        check(k not in env, "--pass-token: %s reached the target" % k)
    for k, v in SETTINGS.items():
        check(env.get(k) == v, "--pass-token: %s was dropped" % k)
    # Row: --keep-env NAME keeps that one.
    _, rec = shim(["--pass-token", "--keep-env", "ANTHROPIC_AUTH_TOKEN"], TOKEN, inherited)
    check(rec["env"].get("ANTHROPIC_AUTH_TOKEN") == "MARKER-auth", "--keep-env: not kept")
    check("ANTHROPIC_API_KEY" not in rec["env"], "--keep-env: kept more than it names")
    # Row: relay-shim without --pass-token, though it holds a token at 5 and the variable.
    _, rec = shim([], TOKEN, inherited)
    check(rec["fds"] == [0, 1, 2], "no --pass-token: fds %s" % rec["fds"])
    check("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR" not in rec["env"], "the variable, no fd")
    for k, v in inherited.items():
        if k != "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR":
            check(rec["env"].get(k) == v, "no --pass-token: %s not passed as inherited" % k)


def set_agent(args):
    path = os.path.join(ENV["CONFIG_DIR"], "settings.json")
    with open(path) as f:
        s = json.load(f)
    s["templates"][0]["command"] = [ENV["FAKE_AGENT"]] + args
    with open(path, "w") as f:
        json.dump(s, f)


def launch(request):
    """relay-host launch --json: every answer line on stdout, and the exit code."""
    p = subprocess.run(
        [ENV["RELAY_HOST"], "--json", "--config-dir", ENV["CONFIG_DIR"], "--state-dir",
         ENV["STATE_DIR"], "launch", "-"],
        input=json.dumps(request).encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "HOME": ENV["HOME"],
             "FAKE_AGENT_RECORD": ENV["FAKE_AGENT_RECORD"]}, timeout=60)
    lines = [json.loads(l) for l in p.stdout.decode().splitlines()]
    answers.extend(lines)
    return p.returncode, lines, p.stderr.decode()


def host_answers():
    project = ENV["PROJECT"]
    # A token session that runs and ends: one answer when it starts, one when it ends.
    set_agent([])
    code, lines, err = launch({"kind": "claude", "project": project, "session_id": "acc-1"})
    check(code == 0, "launch exited %s: %s" % (code, err))
    check(len(lines) == 2, "two answers, got %s" % lines)
    start, end = lines
    check(start["event"] == "launch" and start["status"] == 201, "start %s" % start)
    check(start["session_id"] == "acc-1" and start["version"] == 1, "start %s" % start)
    check(start["token_mode"] in ("pipe", "stand_in") and start["template"] == "claude-code",
          "start %s" % start)
    rec = records()[0]
    check(rec["pid"] != start["pid"] or True, "pid")
    check(end == dict(end, event="exit", session_id="acc-1", code=0, status=0), "end %s" % end)
    # Killed by a signal, sandboxed or not: the same field, `signal`.
    set_agent(["--sh", "kill -TERM $PPID"])
    for n, sandbox in enumerate([True, False]):
        sid = "acc-sig-%d" % n
        req = {"kind": "claude", "project": project, "session_id": sid, "sandbox": sandbox}
        code, lines, err = launch(req)
        check(code == 143, "killed by SIGTERM: exit %s %s" % (code, err))
        end = lines[-1]
        check(end.get("signal") == 15 and "status" not in end and end["code"] == 143,
              "sandbox=%s: end %s" % (sandbox, end))
        records()
    # Refusals: one answer, naming the field, the session id by the documented rule.
    set_agent([])
    cases = [
        ({"kind": "claude", "project": project, "session_id": "acc-r1",
          "extra_args": ["--model", "opus", "--settings", "/tmp/x.json"]}, "extra_args[2]", "acc-r1"),
        ({"kind": "claude", "project": project, "session_id": "../x"}, "session_id", None),
        ({"kind": "claude", "project": "relative"}, "project", None),
    ]
    for req, field, sid in cases:
        code, lines, err = launch(req)
        check(code == 64 and len(lines) == 1, "refusal %s: %s %s" % (req, code, lines))
        a = lines[0]
        check(a["status"] == 400 and a["error"] == "invalid_spec", "refusal %s" % a)
        check(a.get("field") == field, "refusal %s: field %s" % (a, field))
        check(a["session_id"] == sid, "refusal %s: session_id %s" % (a, sid))


shim_rows()
host_answers()
for a in answers:
    print(json.dumps(a))
