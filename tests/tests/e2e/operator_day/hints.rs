//! Hints by cause: a folder at the token path, the user-namespace cause found, and relay's
//! sentence before bwrap's own line.

use super::*;

#[test]
fn a_folder_at_the_token_path_is_not_a_regular_file_not_a_mode_problem() {
    let fx = world();
    std::fs::remove_file(&fx.token_file).unwrap();
    std::fs::create_dir(&fx.token_file).unwrap();
    std::fs::set_permissions(
        &fx.token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = finish(host(&fx, &["launch"]).arg(claude_req(&fx, "d1")));
    assert_eq!(out.code, Some(78), "{}", out.stderr);
    let message = out.answer()["message"].as_str().unwrap().to_string();
    assert!(message.ends_with(": not a regular file"), "{message}");
    for args in [&["status"][..], &["token", "check"]] {
        let out = fx.host(args);
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(!text.contains("chmod 600"), "{args:?}: {text}");
        assert!(text.contains("not a regular file"), "{args:?}: {text}");
        assert!(
            text.contains("hint: the token path names a folder"),
            "{args:?}: {text}"
        );
    }
}

/// A `bwrap` (the fake one) that fails as bwrap does where user namespaces are blocked; its file
/// names the start report's option, so a launch would not probe it first.
fn failing_bwrap(fx: &World) -> std::path::PathBuf {
    let bwrap = fx.root.join("bwrap");
    std::fs::write(
        &bwrap,
        "#!/bin/sh\n# --json-status-fd --bind-fd --ro-bind-fd\n\
         echo 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&bwrap, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fx.set_bwrap(&bwrap);
    bwrap
}

/// `relay-host ARGS` in a mount namespace of its own where `user.max_user_namespaces` reads 0
/// (a file bound over it; the kernel's own value is untouched).
fn with_max_userns_zero(fx: &World, args: &[&str]) -> Out {
    let zero = fx.root.join("zero");
    std::fs::write(&zero, "0\n").unwrap();
    let inner = host(fx, args);
    let mut cmd = Command::new("unshare");
    cmd.args([
        "-m",
        "sh",
        "-c",
        "mount --bind \"$0\" /proc/sys/user/max_user_namespaces && exec \"$@\"",
    ])
    .arg(&zero)
    .arg(inner.get_program())
    .args(inner.get_args())
    .envs(inner.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
    .env_remove("CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    finish(&mut cmd)
}

#[test]
fn the_user_namespace_hint_names_the_cause_found_and_bwraps_line_comes_after_relays() {
    let fx = world();
    let bwrap = failing_bwrap(&fx);
    let out = with_max_userns_zero(&fx, &["--json", "status"]);
    assert_eq!(out.code, Some(78), "{}", out.stderr);
    let r = out.json("status --json");
    let checks = r["checks"].as_array().unwrap();
    let userns = checks
        .iter()
        .find(|c| c["name"] == "user namespaces")
        .expect("the check");
    assert_eq!(userns["ok"], false, "{r}");
    assert_eq!(userns["detail"], "user.max_user_namespaces is 0", "{r}");
    let hint = userns["hint"].as_str().unwrap();
    assert!(
        hint.contains("sysctl -w user.max_user_namespaces="),
        "{hint}"
    );
    assert!(
        !hint.contains("unprivileged_userns_clone"),
        "not Debian's switch: {hint}"
    );

    // A launch: one line, relay's sentence first and bwrap's own line after it.
    let req = claude_req(&fx, "u1");
    let out = with_max_userns_zero(&fx, &["launch", req.to_str().unwrap()]);
    assert_eq!(out.code, Some(78), "{}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "only relay's answer, bwrap's line inside it: {:?}",
        out.stderr
    );
    let message = out.answer()["message"].as_str().unwrap().to_string();
    let relay = message.find(&format!(
        "bwrap {:?} does not work",
        bwrap.display().to_string()
    ));
    let bwraps = message.find("bwrap: setting up uid map: Permission denied");
    assert!(
        relay.is_some() && bwraps.is_some() && relay < bwraps,
        "{message}"
    );
}

/// `ls` is `ps` (the word the anchors use); `run --help` shows examples, relay's arguments
/// before `--` and Claude's after.
#[test]
fn ls_is_ps_and_run_help_shows_examples() {
    let fx = world();
    let ps = fx.host(&["--json", "ps"]);
    let ls = fx.host(&["--json", "ls"]);
    assert_eq!(ls.code, Some(0), "{}", ls.stderr);
    assert_eq!(ls.stdout, ps.stdout);
    let help = fx.host(&["run", "--help"]);
    assert_eq!(help.code, Some(0), "{}", help.stderr);
    for example in [
        "Examples:",
        "relay-host run --project ~/src/app",
        "relay-host run -- -p \"explain this repo\"",
        "relay-host run --continue",
        "relay-host run --resume ID",
    ] {
        assert!(help.stdout.contains(example), "{example}: {}", help.stdout);
    }
}
