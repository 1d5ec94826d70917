//! Templates that extend a built-in one, and `relay-host templates`.

use super::*;

#[test]
fn an_entry_with_a_builtin_id_changes_only_the_fields_it_gives() {
    let fx = world();
    let agent = relay_tests::fake_agent_arg();
    fx.settings(json!({"claude_token_file": "~/.config/acme-ltt/token",
                "templates": [{"id": "claude-code", "command": [agent],
                               "env": {"EXTRA": "1"},
                               "network": {"allow": ["example.com"]}}]}));
    let out = fx.host(&["--json", "templates"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let t = &out.json("templates --json")["templates"][0];
    assert_eq!(t["id"], "claude-code");
    assert_eq!(t["command"], json!([agent]), "command replaces");
    assert_eq!(t["env"]["EXTRA"], "1", "{t}");
    assert_eq!(
        t["env"]["CLAUDE_CONFIG_DIR"], "{claude_config}",
        "env merges: {t}"
    );
    assert_eq!(t["env"]["DISABLE_AUTOUPDATER"], "1", "{t}");
    assert_eq!(
        t["sandbox"]["read_write"],
        json!(["{project}", "{claude_config}"]),
        "the built-in grants stay: {t}"
    );
    assert_eq!(
        t["network"]["allow"],
        json!(["api.anthropic.com", "example.com"]),
        "allow-list entries add: {t}"
    );
    // The launch the operator meant: the built-in grants show the project.
    let out = finish(host(&fx, &["launch"]).arg(claude_req(&fx, "ext")));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rec = relay_tests::read_records(&fx.record)
        .pop()
        .expect("a start line");
    assert_eq!(rec["env"]["EXTRA"], "1", "{rec}");
    assert_eq!(rec["token_fd_var"], "5", "{rec}");
}

#[test]
fn templates_prints_settings_that_load_as_the_same_templates() {
    let fx = world();
    fx.settings(json!({"templates": [{"id": "pi", "command": ["pi"], "sandbox": false}]}));
    let json_text = fx.host(&["templates"]).stdout;
    let as_json: Value = serde_json::from_str(&json_text).expect("JSON by default");
    let ids: Vec<&str> = as_json["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["claude-code", "shell", "pi"], "built-ins included");
    // The TOML form, saved as settings.toml, gives the same templates back.
    let toml_text = fx.host(&["templates", "--toml"]).stdout;
    std::fs::remove_file(fx.config.join("settings.json")).unwrap();
    std::fs::write(fx.config.join("settings.toml"), &toml_text).unwrap();
    assert_eq!(
        fx.host(&["templates"]).stdout,
        toml_text,
        "TOML when settings are TOML"
    );
    let again: Value = fx.host(&["--json", "templates"]).json("templates --json");
    assert_eq!(again, as_json);
}
