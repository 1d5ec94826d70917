//! Settings errors: their own code (`settings_invalid`), the key path, the file and line, and a
//! `status` that does not send a person to `claude setup-token` for a typo.

use super::*;

#[test]
fn a_settings_type_error_names_the_key_file_and_line_with_its_own_code() {
    let fx = world();
    let file = fx.config.join("settings.json");
    std::fs::write(
        &file,
        "{\"claude_token_file\": \"~/.config/acme-ltt/token\",\n \"templates\": [{\"id\": \"x\", \
         \"command\": [\"a\"],\n   \"env\": {\"FOO\": 5}}]}\n",
    )
    .unwrap();
    let out = finish(host(&fx, &["launch"]).arg(claude_req(&fx, "s1")));
    assert_eq!(out.code, Some(78), "{}", out.stderr);
    let answer = out.answer();
    assert_eq!(answer["error"], "settings_invalid", "{answer}");
    let message = answer["message"].as_str().unwrap();
    let want = format!(
        "{}: templates[0].env.FOO: invalid type: integer `5`, expected a string at line 3 column",
        file.display()
    );
    assert!(message.starts_with(&want), "{message}");

    // status: the file named, the error, no advice to make a token.
    let out = fx.host(&["status"]);
    assert_eq!(out.code, Some(78));
    assert!(
        out.stdout
            .contains(&format!("settings file:     {}\n", file.display())),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("templates[0].env.FOO"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("setup-token"),
        "a typo is not a missing token: {}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("hint: fix the settings file where the message points"),
        "{}",
        out.stdout
    );

    // TOML: the same path, its line.
    std::fs::remove_file(&file).unwrap();
    let toml_file = fx.config.join("settings.toml");
    std::fs::write(
        &toml_file,
        "[[templates]]\nid = \"x\"\ncommand = [\"a\"]\nenv = { FOO = 5 }\n",
    )
    .unwrap();
    let out = finish(host(&fx, &["launch"]).arg(claude_req(&fx, "s2")));
    let answer = out.answer();
    assert_eq!(answer["error"], "settings_invalid", "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("{}: templates[0].env.FOO: ", toml_file.display())),
        "{message}"
    );
    assert!(message.contains("line 4"), "{message}");
    // A template with another id and no command says which.
    std::fs::write(&toml_file, "[[templates]]\nid = \"pi\"\n").unwrap();
    let out = finish(host(&fx, &["launch"]).arg(claude_req(&fx, "s3")));
    let message = out.answer()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("settings.toml: templates[0]: "),
        "{message}"
    );
    assert!(
        message.contains("template \"pi\": command is missing"),
        "{message}"
    );
}
