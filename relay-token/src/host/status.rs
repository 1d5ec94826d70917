//! `relay-host status`: paths and health. Names the token file, never its content.

use serde_json::{json, Value};

use super::Host;
use crate::path::claude_token_path_in;
use crate::redact::Redactor;
use crate::{read_claude_token, sandbox};

/// The status report as JSON.
pub fn report(host: &Host) -> Value {
    let (settings, file, settings_error) =
        match crate::settings::Settings::load_with_path(&host.config_dir) {
            Ok((s, f)) => (s, f, None),
            Err(e) => (Default::default(), None, Some(e.to_string())),
        };
    let token = if settings.claude_token_file.is_empty() {
        json!({"configured": false})
    } else {
        match claude_token_path_in(&settings.claude_token_file, Some(&host.home)) {
            Err(e) => json!({"configured": true, "ok": false, "error": e.to_string()}),
            Ok(None) => json!({"configured": false}),
            Ok(Some(p)) => match read_claude_token(&p) {
                Ok(t) => {
                    let len = t.len();
                    drop(t);
                    json!({"configured": true, "path": p, "ok": true, "bytes": len})
                }
                Err(e) => {
                    json!({"configured": true, "path": p, "ok": false, "error": e.to_string()})
                }
            },
        }
    };
    let bwrap = match sandbox::find_bwrap(settings.bwrap.as_deref()) {
        Ok(p) => json!({"path": p, "works": true}),
        Err(e) => json!({"works": false, "error": e.to_string()}),
    };
    let shim = match host.find_shim(&settings) {
        Ok(p) => json!({"path": p}),
        Err(e) => json!({"error": e}),
    };
    let mut report = json!({
        "config_dir": host.config_dir,
        "state_dir": host.state_dir,
        "settings_file": file,
        "settings_error": settings_error,
        "claude_token_file": settings.claude_token_file,
        "token": token,
        "bwrap": bwrap,
        "shim": shim,
    });
    // A token pasted into the setting instead of its path is printed nowhere: the same
    // `sk-ant-...` and `Bearer ...` redaction as the log lines, on every string.
    redact_strings(&mut report, &Redactor::default());
    report
}

fn redact_strings(v: &mut Value, redactor: &Redactor) {
    match v {
        Value::String(s) => *s = redactor.redact(s),
        Value::Array(a) => a.iter_mut().for_each(|x| redact_strings(x, redactor)),
        Value::Object(m) => m.values_mut().for_each(|x| redact_strings(x, redactor)),
        _ => {}
    }
}

/// Prints the report (`--json`: one JSON object); returns 0.
pub fn print(host: &Host, json: bool) -> i32 {
    let r = report(host);
    if json {
        println!("{r}");
        return 0;
    }
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    println!("config folder:     {}", s(&r["config_dir"]));
    println!("state folder:      {}", s(&r["state_dir"]));
    println!("settings file:     {}", s(&r["settings_file"]));
    if !r["settings_error"].is_null() {
        println!("settings error:    {}", s(&r["settings_error"]));
    }
    let stored = s(&r["claude_token_file"]);
    println!(
        "claude_token_file: {}",
        if stored.is_empty() {
            "(not set)".into()
        } else {
            stored
        }
    );
    let t = &r["token"];
    if t["configured"] == json!(true) {
        if t["ok"] == json!(true) {
            println!("token:             ok ({} bytes)", s(&t["bytes"]));
        } else {
            println!("token:             {}", s(&t["error"]));
        }
    }
    let b = &r["bwrap"];
    if b["works"] == json!(true) {
        println!("bwrap:             {} (works)", s(&b["path"]));
    } else {
        println!("bwrap:             {}", s(&b["error"]));
    }
    let sh = &r["shim"];
    println!(
        "relay-shim:        {}",
        if sh["path"].is_null() {
            s(&sh["error"])
        } else {
            s(&sh["path"])
        }
    );
    0
}
