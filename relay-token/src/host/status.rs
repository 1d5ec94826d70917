//! `relay-host status`: paths and health. Names the token file, never its content.

use serde_json::{json, Value};

use super::Host;
use crate::path::claude_token_path_in;
use crate::redact::Redactor;
use crate::sandbox;

/// The status report as JSON.
///
/// ```no_run
/// let host = relay_token::host::Host::from_dirs("/c".into(), "/s".into())?;
/// let report = relay_token::host::status::report(&host);
/// println!("{}", report["claude_token_file"]);
/// # Ok::<(), std::io::Error>(())
/// ```
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
            Ok(Some(p)) => {
                let mut check = super::token_file::check(&p);
                check["configured"] = json!(true);
                check
            }
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

/// True when every part a launch needs is usable: the settings load, the token file (when set)
/// reads as a token, bwrap works and a shim is found.
///
/// ```
/// let r = serde_json::json!({"settings_error": null, "token": {"configured": false}, "bwrap": {"works": true}, "shim": {"path": "/s"}});
/// assert!(relay_token::host::status::usable(&r));
/// ```
pub fn usable(r: &Value) -> bool {
    r["settings_error"].is_null()
        && (r["token"]["configured"] != json!(true) || r["token"]["ok"] == json!(true))
        && r["bwrap"]["works"] == json!(true)
        && !r["shim"]["path"].is_null()
}

/// The token file's health (from [`super::token_file::check`]) as text lines.
///
/// ```
/// let r = relay_token::host::token_file::check("/nonexistent/token".as_ref());
/// let text = relay_token::host::status::token_text(&r);
/// assert!(text.contains("no such file or directory"));
/// assert!(text.contains("hint: "));
/// ```
pub fn token_text(r: &Value) -> String {
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out = format!("token file:        {}\n", s(&r["path"]));
    if !r["mode"].is_null() {
        let links = r["links"].as_u64().unwrap_or(0);
        out += &format!(
            "  mode {}, owner {}, {links} link{}, {} bytes, written {} days ago\n",
            s(&r["mode"]),
            s(&r["owner"]),
            if links == 1 { "" } else { "s" },
            s(&r["size"]),
            s(&r["age_days"]),
        );
    }
    if r["ok"] == json!(true) {
        out += "  reads as a token: ok\n";
    } else {
        out += &format!("  reads as a token: no: {}\n", s(&r["error"]));
    }
    if let Some(h) = r["hint"].as_str() {
        out += &format!("  hint: {h}\n");
    }
    for w in r["warnings"].as_array().into_iter().flatten() {
        out += &format!("  warning: {}\n", s(w));
    }
    out
}

/// Prints the report (`--json`: one JSON object); returns 0 when [`usable`], else 78.
///
/// ```no_run
/// let host = relay_token::host::Host::from_dirs("/c".into(), "/s".into())?;
/// relay_token::host::status::print(&host, false);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn print(host: &Host, json: bool) -> i32 {
    let r = report(host);
    let code = if usable(&r) { 0 } else { 78 };
    if json {
        println!("{r}");
        return code;
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
    if stored.is_empty() {
        println!("claude_token_file: (not set: Claude sessions get no token)");
        println!("  hint: {}", super::human::MAKE_TOKEN);
    } else {
        println!("claude_token_file: {stored}");
    }
    let t = &r["token"];
    if t["configured"] == json!(true) {
        if t["path"].is_null() {
            println!("token:             {}", s(&t["error"]));
        } else {
            print!("{}", token_text(t));
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
    code
}
