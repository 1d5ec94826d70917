//! Writes by allow-list (issue 50): a session writes only where its template grants, and no
//! grant reaches where the operator's own programs, a later token session or the host run or
//! read configuration. Each case runs the real `relay-host`, `relay-shim` and `bwrap`, as root
//! and as uid 65534:
//!
//! 1. the built-in `shell` template, as shipped, writes its project and nothing of the home
//!    (`~/.cargo/env` that `~/.profile` sources, `~/.bash_aliases`, `~/.cargo/bin`, a user
//!    systemd unit, another repository's `.git/config`);
//! 2. a grant or a project in the home itself, above it, in its dot-folders or in a system
//!    folder the host runs code from is refused before anything runs, naming the path, why and
//!    the way out; `"writes_home": true` lets a template write the home, and `status` warns;
//! 3. a repository beneath another session's grant: what a `shell` session plants in its
//!    `.git/config` (a clean filter) does not run in a later token session's `git status`, and
//!    a token session's git refuses another repository it is shown;
//! 4. relay makes nothing in the operator's home while a session runs (no placeholder, even
//!    for a template that writes the home), and the operator's login shell reads its
//!    `~/.profile` meanwhile;
//! 5. beside a template that writes the home (`"writes_home": true`), what its session plants
//!    in `~/.cargo/env` and `~/.bash_aliases` runs in no shell of a later token session that
//!    reads the home (a login bash, an interactive one, `source ~/.bashrc`: what Claude Code's
//!    shell snapshot runs);
//! 6. a session that opens many connections the allow-list refuses adds a bounded number of
//!    rows to the operator's logs (three a destination, then one count).
//!
//! Build the binaries first: `cargo build -p relay-host -p relay-shim -p relay-tests --bins`.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use relay_tests::world::{ScriptAt, TokenScript, World, NOBODY, SCRIPT_TIMEOUT};
use serde_json::{json, Value};

/// A world whose `relay-host` runs as root or (`user`) as that uid and gid with no groups.
fn world(user: Option<u32>) -> World {
    World::builder().user(user).build()
}

#[test]
fn the_shell_template_writes_its_project_not_the_home_as_root() {
    the_shell_template_writes_its_project_not_the_home(None)
}

#[test]
fn the_shell_template_writes_its_project_not_the_home_as_a_user() {
    the_shell_template_writes_its_project_not_the_home(Some(NOBODY))
}

#[test]
fn grants_and_projects_where_code_runs_are_refused_as_root() {
    grants_and_projects_where_code_runs_are_refused(None)
}

#[test]
fn grants_and_projects_where_code_runs_are_refused_as_a_user() {
    grants_and_projects_where_code_runs_are_refused(Some(NOBODY))
}

#[test]
fn a_repository_beneath_a_grant_steers_no_token_git_as_root() {
    a_repository_beneath_a_grant_steers_no_token_git(None)
}

#[test]
fn a_repository_beneath_a_grant_steers_no_token_git_as_a_user() {
    a_repository_beneath_a_grant_steers_no_token_git(Some(NOBODY))
}

#[test]
fn a_home_writer_plants_nothing_a_token_session_sources_as_root() {
    a_home_writer_plants_nothing_a_token_session_sources(None)
}

#[test]
fn a_home_writer_plants_nothing_a_token_session_sources_as_a_user() {
    a_home_writer_plants_nothing_a_token_session_sources(Some(NOBODY))
}

#[test]
fn refused_connections_are_noted_within_bounds_as_root() {
    refused_connections_are_noted_within_bounds(None)
}

#[test]
fn refused_connections_are_noted_within_bounds_as_a_user() {
    refused_connections_are_noted_within_bounds(Some(NOBODY))
}

#[test]
fn nothing_is_made_in_the_home_while_a_session_runs_as_root() {
    nothing_is_made_in_the_home_while_a_session_runs(None)
}

#[test]
fn nothing_is_made_in_the_home_while_a_session_runs_as_a_user() {
    nothing_is_made_in_the_home_while_a_session_runs(Some(NOBODY))
}

/// Single-quotes `p` for `/bin/sh`.
fn q(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// A shell request for the `shell` template running `script` in `project`.
fn shell_req(project: &Path, script: &str) -> Value {
    json!({"kind": "terminal", "template": "shell", "project": project,
           "extra_args": ["-c", script]})
}

/// What rustup and Debian lay in a home: `~/.profile` and `~/.bashrc` source `~/.cargo/env`,
/// `~/.bashrc` sources `~/.bash_aliases`; a user systemd folder; `~/.cargo/bin/cargo`.
fn operator_home(home: &Path) {
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::fs::create_dir_all(home.join(".config/systemd/user")).unwrap();
    std::fs::write(home.join(".cargo/env"), "export FROM_CARGO_ENV=operator\n").unwrap();
    std::fs::write(
        home.join(".cargo/bin/cargo"),
        "#!/bin/sh\necho operator-cargo\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".profile"),
        "export FROM_PROFILE=yes\n. \"$HOME/.cargo/env\"\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".bashrc"),
        ". \"$HOME/.cargo/env\"\n[ -f ~/.bash_aliases ] && . ~/.bash_aliases\n",
    )
    .unwrap();
}

/// The operator's own login shell on the host (`bash -lc SCRIPT`, `HOME` the world's home, an
/// environment of `PATH` alone), run to its end.
fn operator_login(home: &Path, script: &str) -> std::process::Output {
    Command::new("bash")
        .args(["-lc", script])
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap()
}

/// Every entry under `dir` with its content's hash (folders and links by kind), sorted.
fn snapshot(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = relay_tests::entries_under(dir)
        .into_iter()
        .map(|(rel, t)| {
            let p = dir.join(&rel);
            match (t.is_file(), t.is_dir()) {
                (true, _) => format!(
                    "{rel} {}",
                    relay_tests::sha256_hex(&std::fs::read(p).unwrap())
                ),
                (_, true) => format!("{rel}/"),
                _ => format!("{rel} ->"),
            }
        })
        .collect();
    out.sort();
    out
}

/// Case 1: the built-in `shell` template as shipped (only the token setting) in a project: it
/// writes its project; every write into the home fails, and the home is byte for byte as it
/// was. Red before: the template wrote all of `~`, and `~/.cargo/env`, `~/.bash_aliases`,
/// `~/.cargo/bin/cargo`, the systemd unit and the other repository's `.git/config` were written.
fn the_shell_template_writes_its_project_not_the_home(user: Option<u32>) {
    let fx = world(user);
    operator_home(&fx.home);
    let other = fx.home.join("src/other");
    std::fs::create_dir_all(&other).unwrap();
    relay_tests::git(&other, &["init", "-q"]);
    fx.with_token(vec![]);
    if let Some(u) = user {
        fx.hand_over(u);
    }
    let before = snapshot(&fx.home);
    let targets = [
        (".cargo/env", "echo 'export FROM_CARGO_ENV=planted' >>"),
        (".bash_aliases", "echo 'echo planted' >"),
        (".bash_logout", "echo 'echo planted' >"),
        (".cargo/bin/cargo", "echo 'echo planted' >"),
        (".config/systemd/user/planted.service", "echo '[Service]' >"),
        (
            "src/other/.git/config",
            "printf '[alias]\\n\\tst = !echo planted\\n' >>",
        ),
        ("notes.txt", "echo planted >"),
    ];
    let mut script = format!("echo ran > {}\n", q(&fx.project.join("ok.txt")));
    for (rel, write) in targets {
        script += &format!(
            "if {write} {p} 2>/dev/null; then echo 'wrote {rel}'; else echo 'denied {rel}'; fi\n",
            p = q(&fx.home.join(rel))
        );
    }
    let out = fx.launch_for(&shell_req(&fx.project, &script), SCRIPT_TIMEOUT);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert_eq!(
        std::fs::read_to_string(fx.project.join("ok.txt")).unwrap(),
        "ran\n",
        "the session did not write its project: {}",
        out.describe()
    );
    for (rel, _) in targets {
        assert!(
            out.stdout.contains(&format!("denied {rel}")),
            "~/{rel} was writable: {}",
            out.describe()
        );
    }
    assert_eq!(snapshot(&fx.home), before, "the home changed");
    // The operator's next login shell reads only what the operator wrote.
    let login = operator_login(&fx.home, "echo \"$FROM_PROFILE $FROM_CARGO_ENV\"");
    assert_eq!(String::from_utf8_lossy(&login.stdout), "yes operator\n");
}

/// Case 2: each grant or project that would let a session write where code or configuration
/// is read refuses the launch (exit 64, `invalid_spec`) before anything runs, naming the path,
/// why, and the way out; the same grant with `"writes_home": true` launches, and `status`
/// warns of that template (and names a refused one as a problem). Red before: every one of
/// these launched (the session's marker was written).
fn grants_and_projects_where_code_runs_are_refused(user: Option<u32>) {
    let fx = world(user);
    let marker = fx.root.join("out/marker");
    std::fs::create_dir_all(fx.root.join("out")).unwrap();
    let units = fx.home.join(".config/systemd/user");
    std::fs::create_dir_all(&units).unwrap();
    // A folder under /var/lib the host's user owns (as root: root; as a user: handed over).
    let var_lib = tempfile::Builder::new()
        .prefix("relay-writes.")
        .tempdir_in("/var/lib")
        .unwrap();
    let out_grant = fx.root.join("out").display().to_string();
    let t = |id: &str, rw: &[&str], writes_home: bool| {
        let mut rw: Vec<String> = rw.iter().map(|s| s.to_string()).collect();
        rw.extend(["{project}".to_string(), out_grant.clone()]);
        let mut v = json!({"id": id, "command": ["/bin/sh"], "network": "none",
                           "sandbox": {"read_write": rw}});
        if writes_home {
            v["writes_home"] = json!(true);
        }
        v
    };
    fx.with_token(vec![
        t("home", &["~/"], false),
        t("cargo", &["~/.cargo"], false),
        t("spool", &["/var/spool"], false),
        t("proj", &["{project}"], false),
        t("opted", &["~/"], true),
    ]);
    if let Some(u) = user {
        fx.hand_over(u);
        let ok = Command::new("chown")
            .arg(format!("{u}:{u}"))
            .arg(var_lib.path())
            .status()
            .unwrap();
        assert!(ok.success());
    }
    let script = format!("touch {}", q(&marker));
    let home = fx.home.display().to_string();
    let cases: Vec<(&str, PathBuf, String, &str)> = vec![
        (
            "home",
            fx.project.clone(),
            format!("read-write grant \"{home}"),
            "writes_home",
        ),
        (
            "cargo",
            fx.project.clone(),
            format!("\"{home}/.cargo\""),
            "writes_home",
        ),
        (
            "spool",
            fx.project.clone(),
            "\"/var/spool\"".into(),
            "system folder",
        ),
        (
            "proj",
            fx.home.clone(),
            format!("project \"{home}\""),
            "it is the home folder",
        ),
        (
            "proj",
            units.clone(),
            format!("project \"{}\"", units.display()),
            "\".config\"",
        ),
        (
            "proj",
            var_lib.path().to_path_buf(),
            format!("project \"{}\"", var_lib.path().display()),
            "\"/var/lib\"",
        ),
    ];
    for (template, project, names, why) in &cases {
        let req = json!({"kind": "terminal", "template": template, "project": project,
                         "extra_args": ["-c", script]});
        let out = fx.launch(&req);
        assert_eq!(
            out.code,
            Some(64),
            "{template} in {project:?}: {}",
            out.describe()
        );
        let a = out.answer();
        assert_eq!(a["error"], "invalid_spec", "{a}");
        let message = a["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(names.as_str()),
            "{message} does not name {names}"
        );
        assert!(message.contains(why), "{message} does not say {why}");
        assert!(message.contains("no session may write there"), "{message}");
        assert!(!marker.exists(), "{template} in {project:?} ran");
    }
    // Opted in: it launches (and still writes nothing the grant does not show).
    let req = json!({"kind": "terminal", "template": "opted", "project": fx.project,
                     "extra_args": ["-c", script]});
    let out = fx.launch(&req);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert!(marker.exists(), "the opted-in template did not run");
    let status = fx.host(&["status", "--json"]);
    let r: Value = serde_json::from_str(&status.stdout).unwrap();
    let warns = r["warnings"].to_string();
    assert!(
        warns.contains("template \\\"opted\\\" sets \\\"writes_home\\\": true"),
        "{warns}"
    );
    let problems = r["problems"].to_string();
    for id in ["home", "cargo", "spool"] {
        assert!(
            problems.contains(&format!("template \\\"{id}\\\"")),
            "{problems}"
        );
    }
    assert!(!problems.contains("opted"), "{problems}");
}

/// Case 3: a `shell` session whose project is `src` (a folder of repositories) plants a clean
/// filter in `src/app/.git/config`, `* filter=x` in `.gitattributes`, and turns on
/// `extensions.worktreeConfig` with the same filter in `config.worktree`. A later token session
/// in `src/app` runs `git status`: no filter runs, and git there knows no filter at all; the
/// control (the filter given by hand) runs. The same token session, shown `src/other` (read
/// only), is refused git there. Red before: the filter ran in the token session
/// (`guarded ran`), and git ran in `src/other`.
fn a_repository_beneath_a_grant_steers_no_token_git(user: Option<u32>) {
    let fx = world(user);
    let src = fx.root.join("src");
    let (app, other) = (src.join("app"), src.join("other"));
    for r in [&app, &other] {
        std::fs::create_dir_all(r).unwrap();
        relay_tests::git(r, &["init", "-q"]);
        std::fs::write(r.join("f"), "one\n").unwrap();
        relay_tests::git(r, &["add", "f"]);
        relay_tests::git(
            r,
            &[
                "-c",
                "user.name=o",
                "-c",
                "user.email=o@x",
                "commit",
                "-qm",
                "one",
            ],
        );
        relay_tests::git(
            r,
            &["config", "remote.origin.url", "https://example.org/r.git"],
        );
    }
    if let Some(u) = user {
        fx.hand_over(u);
    }
    let marker = app.join("marker");
    let filter = format!(
        "[filter \"x\"]\n\tclean = \"touch {} && cat\"\n",
        marker.display()
    );
    let plant = format!(
        "for r in app other; do printf '%s' {f} >> $r/.git/config && echo '* filter=x' > $r/.gitattributes \
         && printf '[extensions]\\n\\tworktreeConfig = true\\n' >> $r/.git/config \
         && printf '%s' {f} > $r/.git/config.worktree || exit 1; done; echo planted",
        f = q(Path::new(&filter))
    );
    fx.with_token(vec![
        json!({"id": "shell", "command": ["/bin/sh"], "network": "none",
                              "sandbox": {"read_write": ["{project}"]}}),
    ]);
    let out = fx.launch_for(&shell_req(&src, &plant), SCRIPT_TIMEOUT);
    assert!(
        out.stdout.contains("planted"),
        "the shell session could not plant: {}",
        out.describe()
    );
    let body = format!(
        "touch -d @1000000001 f\ngit status >/dev/null 2>&1; echo \"guarded rc=$?\" >> \"$seen\"\n\
         if [ -e marker ]; then echo 'guarded ran' >> \"$seen\"; rm marker; fi\n\
         git config --get filter.x.clean >> \"$seen\" || echo 'no filter' >> \"$seen\"\n\
         git config --get remote.origin.url >> \"$seen\"\n\
         git -C {other} status >/dev/null 2>&1; echo \"other rc=$?\" >> \"$seen\"\n\
         touch -d @1000000002 f\ngit -c filter.x.clean='touch {m}' status >/dev/null 2>&1\n\
         if [ -e marker ]; then echo 'control ran' >> \"$seen\"; rm marker; fi\n",
        other = q(&other),
        m = marker.display()
    );
    let seen = fx.run_token_script(
        &TokenScript::new(&body)
            .at(ScriptAt::Beside)
            .project(&app)
            .sandbox(json!({"read": [src], "read_write": ["{project}"]})),
    );
    assert_eq!(
        seen, "guarded rc=0\nno filter\nhttps://example.org/r.git\nother rc=128\ncontrol ran\n",
        "what the token session's git did"
    );
}

/// Case 4: while a session runs, nothing new stands in the operator's home: not for the
/// built-in `shell` (project only), not for a template that writes the home (`writes_home`),
/// whose missing write-deny entries are no longer held by placeholders there; meanwhile the
/// operator's login shell reads `~/.profile`. Red before: `~/.bash_profile` and
/// `~/.bash_login` (and more) stood in the home during the session, and `bash -l` skipped
/// `~/.profile`.
fn nothing_is_made_in_the_home_while_a_session_runs(user: Option<u32>) {
    let fx = world(user);
    operator_home(&fx.home);
    for (id, template) in [
        ("shell", json!({"id": "shell"})),
        (
            "opted",
            json!({"id": "opted", "command": ["/bin/sh"], "network": "none",
                         "sandbox": {"read_write": ["~/", "{project}"]}, "writes_home": true}),
        ),
    ] {
        fx.with_token(vec![template]);
        if let Some(u) = user {
            fx.hand_over(u);
        }
        let before = snapshot(&fx.home);
        let (started, go) = (fx.project.join("started"), fx.project.join("go"));
        let script = format!(
            "touch {s}; i=0; while [ ! -e {g} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done",
            s = q(&started),
            g = q(&go)
        );
        let req = json!({"kind": "terminal", "template": id, "project": fx.project,
                         "extra_args": ["-c", script]});
        let running = fx.launch_bg(&req);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !started.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !started.exists() {
            let out = running.finish(Duration::from_secs(5));
            panic!("{id}: the session did not start: {}", out.describe());
        }
        let during = snapshot(&fx.home);
        let login = operator_login(&fx.home, "echo \"$FROM_PROFILE\"");
        std::fs::write(&go, "").unwrap();
        let out = running.finish(SCRIPT_TIMEOUT);
        assert_eq!(out.code, Some(0), "{id}: {}", out.describe());
        assert_eq!(
            during, before,
            "{id}: the home changed while the session ran"
        );
        assert_eq!(
            String::from_utf8_lossy(&login.stdout),
            "yes\n",
            "{id}: bash -l"
        );
        for f in [&started, &go] {
            std::fs::remove_file(f).unwrap();
        }
    }
}

/// Case 5: a `shell` that writes the home (opted in) appends to `~/.cargo/env` (which
/// `~/.profile` and `~/.bashrc` source) and writes `~/.bash_aliases` (which `~/.bashrc`
/// sources), each touching a marker. A later token session whose template reads the home runs
/// what Claude Code's shell snapshot runs (`bash -c -l`, then `source ~/.bashrc`) and an
/// interactive bash: nothing planted runs, since its `HOME` is an empty folder of relay's. The
/// control, the operator's own login shell on the host, does run the plant (the opt-in's risk,
/// which `status` names). Red before: the token session's shells ran both plants.
fn a_home_writer_plants_nothing_a_token_session_sources(user: Option<u32>) {
    let fx = world(user);
    operator_home(&fx.home);
    let marker = fx.root.join("out/marker");
    std::fs::create_dir_all(fx.root.join("out")).unwrap();
    let writer = json!({"id": "shell", "command": ["/bin/sh"], "network": "none",
                        "sandbox": {"read_write": ["~/", "{project}", fx.root.join("out")]},
                        "writes_home": true});
    fx.with_token(vec![writer.clone()]);
    if let Some(u) = user {
        fx.hand_over(u);
    }
    let plant = format!(
        "echo 'touch {m}.cargo-env' >> ~/.cargo/env && echo 'touch {m}.aliases' > ~/.bash_aliases \
         && echo planted",
        m = marker.display()
    );
    let out = fx.launch_for(&shell_req(&fx.project, &plant), SCRIPT_TIMEOUT);
    assert!(out.stdout.contains("planted"), "{}", out.describe());
    let body = format!(
        "bash -c -l 'source ~/.bashrc < /dev/null; true' </dev/null >/dev/null 2>&1\n\
         bash -i -c true </dev/null >/dev/null 2>&1\n\
         echo \"home=$HOME\" >> \"$seen\"\n\
         for f in {m}.cargo-env {m}.aliases; do [ -e \"$f\" ] && echo \"ran $f\" >> \"$seen\"; done\ntrue\n",
        m = marker.display()
    );
    let seen = fx.run_token_script(
        &TokenScript::new(&body)
            .at(ScriptAt::Beside)
            .sandbox(json!({"read": ["~/"], "read_write": ["{project}"]}))
            .beside(writer),
    );
    assert_eq!(
        seen, "home=/run/relay/home\n",
        "what the token session's shells ran"
    );
    // The control: the operator's own login shell on the host runs what was planted.
    let login = operator_login(&fx.home, "true");
    assert!(login.status.success());
    assert!(
        fx.root.join("out/marker.cargo-env").exists(),
        "the control ran no plant"
    );
}

/// Case 6: a session behind an allow-list opens 40 connections to two hosts the list refuses.
/// `events.jsonl` holds three `network_denied` rows a destination and one
/// `network_denied_suppressed` row counting the other 34; the host log likewise. Red before:
/// 40 rows (3,000 refusals added 3.8 MB in seconds).
fn refused_connections_are_noted_within_bounds(user: Option<u32>) {
    let fx = world(user);
    fx.with_token(vec![json!({"id": "shell", "command": ["/bin/sh"],
                              "network": {"allow": ["127.0.0.1:9"]},
                              "sandbox": {"read_write": ["{project}"]}})]);
    if let Some(u) = user {
        fx.hand_over(u);
    }
    let script = "for i in $(seq 1 40); do curl -s -o /dev/null --max-time 5 \
                  https://h$((i % 2)).example/; done; echo tried";
    let out = fx.launch_for(&shell_req(&fx.project, script), SCRIPT_TIMEOUT);
    assert!(out.stdout.contains("tried"), "{}", out.describe());
    let text = std::fs::read_to_string(fx.state.join("events.jsonl")).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let schema = relay_tests::schema::Schema::load("events.schema.json");
    let network = |r: &&Value| {
        r["event"]
            .as_str()
            .is_some_and(|e| e.starts_with("network"))
    };
    for r in rows.iter().filter(network) {
        schema.assert_valid(r);
    }
    let denied: Vec<&Value> = rows
        .iter()
        .filter(|r| r["event"] == "network_denied")
        .collect();
    assert_eq!(denied.len(), 6, "{text}");
    for h in ["h0.example", "h1.example"] {
        assert_eq!(
            denied.iter().filter(|r| r["host"] == h).count(),
            3,
            "{text}"
        );
    }
    let more: Vec<&Value> = rows
        .iter()
        .filter(|r| r["event"] == "network_denied_suppressed")
        .collect();
    assert_eq!(more.len(), 1, "{text}");
    assert_eq!(
        (
            more[0]["suppressed"].as_u64(),
            more[0]["destinations"].as_u64()
        ),
        (Some(34), Some(2)),
        "{text}"
    );
    // Each destination's whole count is told: three rows and 17 more each.
    assert_eq!(
        more[0]["more"],
        json!({"h0.example:443": 17, "h1.example:443": 17}),
        "{text}"
    );
    let log = std::fs::read_to_string(fx.state.join("relay-host.log")).unwrap();
    assert_eq!(log.matches("network refused").count(), 6, "{log}");
    assert!(
        log.contains("34 more refused connections not written"),
        "{log}"
    );
}

/// Case 3 with the real Claude Code 2.1.332 and the built-in template: the project is a
/// repository whose `.git/config` holds a clean filter (what a `shell` session whose project is
/// the folder above can write there) and whose `.gitattributes` applies it to every file, its
/// tracked file touched. Claude's Bash tool runs `git status` and `git diff` in the project: no
/// filter runs. The control, git on the host, runs it. Red before: the wrapper trusted the
/// project repository's own configuration, and the filter ran through Claude's Bash tool.
#[test]
fn claudes_own_git_status_runs_no_filter_a_session_planted_in_the_repository() {
    use relay_tests::agent::{Setup, FINAL};
    use relay_tests::messages_api::Step;
    let s = Setup::new(|_, _| {
        vec![
            Step::bash("git status; git diff --stat; true"),
            Step::text(FINAL),
        ]
    });
    let marker = s.project.join("marker");
    let filter = format!(
        "[filter \"x\"]\n\tclean = \"touch {} && cat\"\n",
        marker.display()
    );
    let config = s.project.join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&filter);
    std::fs::write(&config, text).unwrap();
    std::fs::write(s.project.join(".gitattributes"), "* filter=x\n").unwrap();
    let touched = Command::new("touch")
        .args(["-d", "@1000000001"])
        .arg(s.project.join("notes.txt"))
        .status()
        .unwrap();
    assert!(touched.success());
    s.hand_over();
    let turn = s.turn("Say hello.");
    assert_eq!(turn.code, Some(0), "{}", turn.describe());
    assert!(
        !marker.exists(),
        "Claude Code's git ran the repository's filter"
    );
    // The session's git refreshed the index: touched again, the file is read again.
    let touched = Command::new("touch")
        .args(["-d", "@1000000002"])
        .arg(s.project.join("notes.txt"))
        .status()
        .unwrap();
    assert!(touched.success());
    let control = s.git(&["status"]);
    assert!(control.status.success());
    assert!(marker.exists(), "the control ran no filter");
}
