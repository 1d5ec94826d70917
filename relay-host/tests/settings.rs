//! Acceptance tests for settings: JSON and TOML alike, both files refused, unknown
//! keys named, parse errors with line and column on one line, byte-identical round trips.

use std::collections::BTreeMap;
use std::fs;

use relay_host::settings::{builtin_templates, Grants, Sandbox, Settings, SettingsError, Template};

const JSON: &str = r#"{
  "claude_token_file": "~/.config/claude-ltt/token",
  "templates": [
    {
      "id": "claude-code",
      "command": ["claude", "--verbose"],
      "env": {"A": "1", "CLAUDE_CONFIG_DIR": "{claude_config}"},
      "sandbox": {"read": ["~/.gitconfig"], "read_write": ["{project}"]}
    },
    {"id": "plain", "command": ["/bin/sh"], "sandbox": false}
  ],
  "bwrap": "/usr/bin/bwrap",
  "shim": "/opt/relay/relay-shim"
}"#;

const TOML: &str = r#"
claude_token_file = "~/.config/claude-ltt/token"
bwrap = "/usr/bin/bwrap"
shim = "/opt/relay/relay-shim"

[[templates]]
id = "claude-code"
command = ["claude", "--verbose"]
env = { A = "1", CLAUDE_CONFIG_DIR = "{claude_config}" }
sandbox = { read = ["~/.gitconfig"], read_write = ["{project}"] }

[[templates]]
id = "plain"
command = ["/bin/sh"]
sandbox = false
"#;

fn expected() -> Settings {
    // An entry with a built-in id extends the built-in template: its command and sandbox
    // replace, its env merges by name, the built-in network stays.
    let mut claude = builtin_templates().remove(0);
    claude.command = vec!["claude".into(), "--verbose".into()];
    claude.env.insert("A".to_string(), "1".to_string());
    claude.sandbox = Sandbox::Grants(Grants {
        read: vec!["~/.gitconfig".into()],
        read_write: vec!["{project}".into()],
    });
    Settings {
        claude_token_file: "~/.config/claude-ltt/token".into(),
        templates: vec![
            claude,
            Template {
                id: "plain".into(),
                command: vec!["/bin/sh".into()],
                env: BTreeMap::new(),
                sandbox: Sandbox::Off,
                request_env: vec![],
                network: None,
                api_base_url: None,
                same_project: None,
                trust_project: None,
                token_mode: Default::default(),
                writes_home: None,
            },
        ],
        bwrap: Some("/usr/bin/bwrap".into()),
        shim: Some("/opt/relay/relay-shim".into()),

        ..Settings::default()
    }
}

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

#[test]
fn json_and_toml_load_the_same() {
    let j = dir_with(&[("settings.json", JSON)]);
    let t = dir_with(&[("settings.toml", TOML)]);
    let (sj, pj) = Settings::load_with_path(j.path()).unwrap();
    let (st, pt) = Settings::load_with_path(t.path()).unwrap();
    assert_eq!(sj, expected());
    assert_eq!(st, expected());
    assert_eq!(pj, Some(j.path().join("settings.json")));
    assert_eq!(pt, Some(t.path().join("settings.toml")));
    assert_eq!(
        Settings::from_json(JSON).unwrap(),
        Settings::from_toml(TOML).unwrap()
    );
}

#[test]
fn neither_file_gives_defaults() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(
        Settings::load_with_path(d.path()).unwrap(),
        (Settings::default(), None)
    );
    assert_eq!(Settings::default().claude_token_file, "");
}

#[test]
fn both_files_is_an_error_naming_both() {
    let d = dir_with(&[("settings.json", "{}"), ("settings.toml", "")]);
    let err = Settings::load(d.path()).unwrap_err();
    let json = d.path().join("settings.json");
    let toml = d.path().join("settings.toml");
    assert!(
        matches!(&err, SettingsError::BothPresent { json: j, toml: t } if *j == json && *t == toml)
    );
    assert_eq!(
        err.to_string(),
        format!(
            "both {} and {} exist: keep one",
            json.display(),
            toml.display()
        )
    );
}

/// `text` must be refused, naming `key`, with a one-line message that names line and column.
fn refused(name: &str, text: &str, key: &str) -> String {
    let d = dir_with(&[(name, text)]);
    let path = d.path().join(name);
    let err = Settings::load(d.path()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, SettingsError::Parse { .. }), "{msg}");
    assert!(msg.starts_with(&format!("{}: ", path.display())), "{msg}");
    assert!(msg.contains(&format!("`{key}`")), "{key} not named: {msg}");
    assert!(!msg.contains('\n'), "not one line: {msg:?}");
    msg
}

#[test]
fn unknown_keys_are_refused_by_name() {
    for (name, text) in [
        ("settings.json", r#"{"colour": 1}"#),
        ("settings.toml", "colour = 1\n"),
    ] {
        refused(name, text, "colour");
    }
    // Inside a template, and inside a template's grants.
    refused(
        "settings.json",
        r#"{"templates": [{"id": "x", "command": ["a"], "bogus": 1}]}"#,
        "bogus",
    );
    refused(
        "settings.toml",
        "[[templates]]\nid = \"x\"\ncommand = [\"a\"]\nbogus = 1\n",
        "bogus",
    );
    refused(
        "settings.json",
        r#"{"templates": [{"id": "x", "command": ["a"], "sandbox": {"read": [], "writ": []}}]}"#,
        "writ",
    );
    refused(
        "settings.toml",
        "[[templates]]\nid = \"x\"\ncommand = [\"a\"]\n[templates.sandbox]\nread = []\nwrit = []\n",
        "writ",
    );
}

#[test]
fn sandbox_true_is_refused_with_a_reason() {
    for (name, text) in [
        (
            "settings.json",
            r#"{"templates": [{"id": "x", "command": ["a"], "sandbox": true}]}"#,
        ),
        (
            "settings.toml",
            "[[templates]]\nid = \"x\"\ncommand = [\"a\"]\nsandbox = true\n",
        ),
    ] {
        let d = dir_with(&[(name, text)]);
        let msg = Settings::load(d.path()).unwrap_err().to_string();
        assert!(
            msg.contains("sandbox: true is the default; give grants or false"),
            "{msg}"
        );
    }
}

#[test]
fn parse_errors_name_line_and_column_on_one_line() {
    let d = dir_with(&[("settings.json", "{\n  \"claude_token_file\": \n}\n")]);
    let msg = Settings::load(d.path()).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "{}: claude_token_file: expected value at line 3 column 1",
            d.path().join("settings.json").display()
        )
    );

    let d = dir_with(&[(
        "settings.toml",
        "bwrap = \"/usr/bin/bwrap\"\nclaude_token_file = \n",
    )]);
    let msg = Settings::load(d.path()).unwrap_err().to_string();
    assert!(!msg.contains('\n'), "{msg:?}");
    assert_eq!(
        msg,
        format!(
            "{}: TOML parse error at line 2, column 21: string values must be quoted, expected literal string",
            d.path().join("settings.toml").display()
        )
    );
    // The quoted source excerpt (`2 | claude_token_file =`) is not part of the line.
    assert!(!msg.contains(" | "), "{msg}");
}

/// A trailing comma is where the parser knows no key yet: the message names the file, the
/// error and its line and column, with no `?` for the key it could not know; inside a template
/// it names the template.
#[test]
fn a_trailing_comma_is_named_without_a_placeholder_key() {
    let d = dir_with(&[("settings.json", "{\"claude_token_file\": \"~/t\",}\n")]);
    let msg = Settings::load(d.path()).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "{}: trailing comma at line 1 column 29",
            d.path().join("settings.json").display()
        )
    );
    let d = dir_with(&[(
        "settings.json",
        "{\"templates\": [{\"id\": \"x\", \"command\": [\"x\"],}]}",
    )]);
    let msg = Settings::load(d.path()).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "{}: templates[0]: trailing comma at line 1 column 45",
            d.path().join("settings.json").display()
        )
    );
}

#[test]
fn written_without_token_file_omits_the_key_and_round_trips() {
    let mut s = expected();
    s.claude_token_file.clear();
    for (text, parse) in [
        (
            s.to_json(),
            Settings::from_json as fn(&str) -> Result<Settings, SettingsError>,
        ),
        (s.to_toml(), Settings::from_toml),
    ] {
        assert!(!text.contains("claude_token_file"), "{text}");
        let back = parse(&text).unwrap();
        assert_eq!(back, s);
        let again = if text.starts_with('{') {
            back.to_json()
        } else {
            back.to_toml()
        };
        assert_eq!(again.as_bytes(), text.as_bytes());
    }
    // Through files, as the host writes and reads them.
    for (name, text) in [
        ("settings.json", s.to_json()),
        ("settings.toml", s.to_toml()),
    ] {
        let d = dir_with(&[(name, &text)]);
        let loaded = Settings::load(d.path()).unwrap();
        let written = if name.ends_with("json") {
            loaded.to_json()
        } else {
            loaded.to_toml()
        };
        assert_eq!(fs::read(d.path().join(name)).unwrap(), written.as_bytes());
    }
    // The empty settings write as nothing at all.
    assert_eq!(Settings::default().to_json(), "{}\n");
    assert_eq!(Settings::default().to_toml(), "");
}

#[test]
fn written_with_token_file_round_trips() {
    let s = expected();
    for text in [s.to_json(), s.to_toml()] {
        assert!(text.contains("claude_token_file"));
    }
    assert_eq!(Settings::from_json(&s.to_json()).unwrap(), s);
    assert_eq!(Settings::from_toml(&s.to_toml()).unwrap(), s);
    assert_eq!(
        Settings::from_json(&s.to_json()).unwrap().to_json(),
        s.to_json()
    );
    assert_eq!(
        Settings::from_toml(&s.to_toml()).unwrap().to_toml(),
        s.to_toml()
    );
}

#[test]
fn unreadable_settings_file_names_it() {
    // A folder named settings.json cannot be read as a file.
    let d = tempfile::tempdir().unwrap();
    fs::create_dir(d.path().join("settings.json")).unwrap();
    let err = Settings::load(d.path()).unwrap_err();
    assert!(matches!(err, SettingsError::Io { .. }));
    assert!(err.to_string().starts_with(&format!(
        "read {}: ",
        d.path().join("settings.json").display()
    )));
}

/// A settings file whose link target was deleted (by a session, say) is an error naming it, never
/// the defaults: the defaults set no token file, so nothing would be denied.
#[test]
fn a_dangling_settings_link_is_an_error_not_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("gone.json"),
        dir.path().join("settings.json"),
    )
    .unwrap();
    let e = Settings::load(dir.path()).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "read {}: No such file or directory (os error 2)",
            dir.path().join("settings.json").display()
        )
    );
}

/// Settings are read like the token file: a FIFO answers at once, a device is refused, and so
/// is a file over 1 MiB.
#[test]
fn settings_are_read_with_the_token_files_care() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = Settings::load(dir.path()).unwrap_err().to_string();
    assert!(e.ends_with("settings.json: not a regular file"), "{e}");
    fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    let e = Settings::load(dir.path()).unwrap_err().to_string();
    assert!(e.ends_with("settings.json: not a regular file"), "{e}");
    fs::remove_file(&path).unwrap();
    fs::write(&path, vec![b' '; (1 << 20) + 1]).unwrap();
    let e = Settings::load(dir.path()).unwrap_err().to_string();
    assert!(e.ends_with("settings.json: larger than 1 MiB"), "{e}");
}

/// A template whose command or environment holds a NUL byte (or whose variable name is empty or
/// holds `=`) is refused when the settings are read, naming the template and the field: no
/// launch gets as far as the spawn with it.
#[test]
fn nul_bytes_and_bad_variable_names_in_a_template_are_refused_when_read() {
    let cases = [
        (
            r#"{"templates": [{"id": "t", "command": ["/bin/sh", "a\u0000b"]}]}"#,
            "command[1] holds a NUL byte",
        ),
        (
            r#"{"templates": [{"id": "t", "command": ["/bin/sh"], "env": {"A": "x\u0000"}}]}"#,
            "env \"A\"",
        ),
        (
            r#"{"templates": [{"id": "t", "command": ["/bin/sh"], "env": {"A=B": "x"}}]}"#,
            "env \"A=B\"",
        ),
        (
            r#"{"templates": [{"id": "t", "command": ["/bin/sh"], "env": {"": "x"}}]}"#,
            "env \"\"",
        ),
    ];
    for (text, says) in cases {
        let err = Settings::from_json(text).unwrap_err().to_string();
        assert!(
            err.contains("template \"t\"") && err.contains(says),
            "{text}: {err}"
        );
    }
}

/// `token_mode` is left out as `"pipe"`, reads `"stand_in"` for an allow-list template, and
/// is refused with a message that says why where stand-in mode cannot work.
#[test]
fn token_mode_stand_in_needs_an_allow_list_and_an_https_gateway() {
    let s =
        Settings::from_json(r#"{"templates": [{"id": "claude-code", "token_mode": "stand_in"}]}"#);
    #[cfg(target_os = "linux")]
    {
        let s = s.unwrap();
        let t = s.template("claude-code").unwrap();
        assert_eq!(t.token_mode, relay_host::settings::TokenMode::StandIn);
        assert!(s.to_json().contains("\"token_mode\": \"stand_in\""));
        assert!(!Settings::default().to_json().contains("token_mode"));
        assert_eq!(Settings::from_toml(&s.to_toml()).unwrap(), s);
    }
    #[cfg(not(target_os = "linux"))]
    assert!(s.unwrap_err().to_string().contains("runs on Linux only"));
    for (text, says) in [
        (
            r#"{"templates": [{"id": "shell", "token_mode": "stand_in"}]}"#,
            "network allow-list",
        ),
        (
            r#"{"templates": [{"id": "c", "command": ["claude"], "sandbox": false, "network": {"allow": []}, "token_mode": "stand_in"}]}"#,
            "needs a sandboxed template",
        ),
        (
            r#"{"templates": [{"id": "claude-code", "api_base_url": "http://127.0.0.1:9", "token_mode": "stand_in"}]}"#,
            "give api_base_url as https://",
        ),
    ] {
        let e = Settings::from_json(text).unwrap_err();
        assert!(matches!(e, SettingsError::Invalid { .. }), "{e}");
        #[cfg(target_os = "linux")]
        assert!(e.to_string().contains(says), "{e}");
        let _ = says;
    }
    let e = Settings::from_json(r#"{"templates": [{"id": "claude-code", "token_mode": "swap"}]}"#);
    assert!(e.unwrap_err().to_string().contains("unknown variant"));
}

/// An `upstream_ca_file` that is relative, missing, or holds no certificate refuses the settings,
/// naming the file; one inside a session's read-write grant refuses them for safety.
#[cfg(target_os = "linux")]
#[test]
fn upstream_ca_file_must_be_a_readable_pem_outside_every_grant() {
    let d = tempfile::tempdir().unwrap();
    let with =
        |p: &std::path::Path| format!(r#"{{"upstream_ca_file": {:?}}}"#, p.display().to_string());
    let missing = d.path().join("missing.pem");
    let e = Settings::from_json(&with(&missing))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("upstream_ca_file {}: ", missing.display())),
        "{e}"
    );
    let garbage = d.path().join("garbage.pem");
    fs::write(&garbage, "not a certificate\n").unwrap();
    let e = Settings::from_json(&with(&garbage))
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds no PEM certificate"), "{e}");
    let e = Settings::from_json(r#"{"upstream_ca_file": "ca.pem"}"#).unwrap_err();
    assert!(e.to_string().contains("give an absolute path"), "{e}");
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let good = d.path().join("ca.pem");
    fs::write(&good, params.self_signed(&key).unwrap().pem()).unwrap();
    let s = Settings::from_json(&with(&good)).unwrap();
    assert_eq!(s.upstream_ca_file.as_deref(), Some(good.as_path()));
    // The same file inside a read-write grant (of a shell that writes the home).
    let home = d.path().to_path_buf();
    let config = home.join("config");
    fs::create_dir(&config).unwrap();
    let with_shell = |p: &std::path::Path| {
        format!(
            r#"{{"upstream_ca_file": {:?}, "templates": [{{"id": "shell",
                "sandbox": {{"read_write": ["~/"]}}, "writes_home": true}}]}}"#,
            p.display().to_string()
        )
    };
    fs::write(config.join("settings.json"), with_shell(&good)).unwrap();
    let host = relay_host::Host {
        config_dir: config.clone(),
        state_dir: d.path().join("state"),
        home,
    };
    let e = host.settings().unwrap_err();
    assert!(e.unsafe_place(), "{e}");
    assert!(
        e.to_string()
            .contains("where a session could add a CA of its own"),
        "{e}"
    );
    let kept = config.join("ca.pem");
    fs::copy(&good, &kept).unwrap();
    fs::write(config.join("settings.json"), with_shell(&kept)).unwrap();
    assert!(host.settings().is_ok(), "the config folder is no grant's");
}

/// `status` names each effective template's token mode.
#[cfg(target_os = "linux")]
#[test]
fn status_shows_each_template_s_token_mode() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("config");
    fs::create_dir(&config).unwrap();
    let text = r#"{"templates": [{"id": "claude-code", "token_mode": "stand_in"}]}"#;
    fs::write(config.join("settings.json"), text).unwrap();
    let host = relay_host::Host {
        config_dir: config,
        state_dir: d.path().join("state"),
        home: d.path().to_path_buf(),
    };
    let r = relay_host::cli::status::report(&host);
    assert_eq!(
        r["templates"],
        serde_json::json!([{"id": "claude-code", "token_mode": "stand_in"},
                           {"id": "shell", "token_mode": "pipe"}])
    );
}
