//! `relay-host status`: paths and health. Names the token file, never its content.

use serde_json::{json, Value};

use std::path::PathBuf;

use crate::human::{path_json, paths_json};
use crate::launch::network::token_refused;
use crate::settings::Settings;
use crate::{reach, Host};
use relay_token::claude_token_path_in;
use relay_token::sandbox;
use relay_token::Redactor;

/// The status report as JSON.
pub fn report(host: &Host) -> Value {
    let (settings, file, settings_error) =
        match crate::settings::Settings::load_with_path(&host.config_dir) {
            Ok((s, f)) => (s, f, None),
            Err(e) => {
                let file = e.path().map(std::path::Path::to_path_buf);
                (Default::default(), file, Some(e))
            }
        };
    let token = token_report(host, &settings);
    let bwrap = match sandbox::find_bwrap(settings.bwrap.as_deref()) {
        Ok(p) => {
            let (binds, start) = bwrap_mode(sandbox::BwrapFeatures::of(&p));
            json!({"path": path_json(&p), "works": true, "binds": binds, "start": start})
        }
        Err(e) => json!({"works": false, "error": e.to_string()}),
    };
    let shim = match host.find_shim(&settings) {
        Ok(p) => json!({"path": path_json(&p)}),
        Err(e) => json!({"error": e.to_string()}),
    };
    let (problems, mut warnings) = reach_checks(host, &settings);
    let settings_error = settings_error.or_else(|| host.settings().err());
    if settings.token_network.is_some() {
        warnings.push(
            "token_network is \"host\": a template with network \"host\" hands the token to a \
             session that can reach any host"
                .to_string(),
        );
    }
    warnings.extend(token_wildcard_warnings(&settings));
    let mut problems = problems;
    write_place_checks(host, &settings, &mut problems, &mut warnings);
    warnings.extend(token["refused_by_api"].as_str().map(str::to_string));
    let leftovers = leftovers(host, &mut warnings);
    let checked = match &settings_error {
        None => super::checks::run(host, Ok(&settings)),
        Some(e) => super::checks::run(host, Err(e)),
    };
    let checks: Vec<Value> = checked.iter().map(super::checks::Check::to_json).collect();
    let claude_ready = ready(&checked, &problems);
    // Each effective template's token mode; none when the settings did not load.
    let templates: Option<Vec<Value>> = settings_error.is_none().then(|| {
        (settings.all_templates().iter())
            .map(|t| json!({"id": t.id, "token_mode": t.token_mode.word()}))
            .collect()
    });
    let mut report = json!({
        "leftovers": leftovers,
        "config_dir": path_json(&host.config_dir),
        "state_dir": path_json(&host.state_dir),
        "settings_file": file.as_deref().map(path_json),
        "settings_error": settings_error.as_ref().map(ToString::to_string),
        "claude_token_file": settings.claude_token_file,
        "token": token,
        "bwrap": bwrap,
        "shim": shim,
        "templates": templates,
        "problems": problems,
        "warnings": warnings,
        "checks": checks,
        "claude_ready": claude_ready,
    });
    // A token pasted into the setting instead of its path is printed nowhere: the same
    // `sk-ant-...` and `Bearer ...` redaction as the log lines, on every string.
    redact_strings(&mut report, &Redactor::default());
    report
}

/// What a host that ended without cleaning up (`kill -9`) left in this state folder: the
/// write-deny placeholders (in the user's home and project) and the session folders no session
/// holds and none kept, and the sessions whose host was lost before it wrote their `exit` row
/// (kept or not). Reported, with a warning naming `relay-host gc`, never removed here:
/// `status` changes nothing.
fn leftovers(host: &Host, warnings: &mut Vec<String>) -> Value {
    let placeholders = crate::launch::placeholders::leftover(&host.state_dir);
    let sessions_dir = host.state_dir.join(crate::state::SESSIONS_DIR);
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&sessions_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|d| d.is_dir() && !crate::state::session_locked(d))
        .filter(|d| !d.join(crate::state::KEEP_MARK).exists())
        .collect();
    folders.sort();
    let mut lost: Vec<String> = std::fs::read_dir(&sessions_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| crate::state::host_lost(&e.path()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    lost.sort();
    if !lost.is_empty() {
        warnings.push(format!(
            "{} session(s) whose host was lost (killed) before it recorded their end: {}; \
             `relay-host gc` writes their exit row (outcome host_lost)",
            lost.len(),
            lost.join(", ")
        ));
    }
    if !placeholders.is_empty() {
        let list: Vec<String> = placeholders
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        warnings.push(format!(
            "{} write-deny placeholder(s) left by a host that ended without removing them: {}; \
             run `relay-host gc` to remove them",
            placeholders.len(),
            list.join(", ")
        ));
    }
    let mounts = crate::launch::placeholders::sandbox_leftovers(&host.state_dir);
    if !mounts.is_empty() {
        let list: Vec<String> = mounts.iter().map(|p| p.display().to_string()).collect();
        warnings.push(format!(
            "{} empty mount point(s) Claude Code's own tool sandbox left in a project, which a \
             host that ended without removing them did not remove: {}; run `relay-host gc` to \
             remove them",
            mounts.len(),
            list.join(", ")
        ));
    }
    if !folders.is_empty() {
        warnings.push(format!(
            "{} session folder(s) of ended sessions left in {}; run `relay-host gc` to remove them",
            folders.len(),
            sessions_dir.display()
        ));
    }
    json!({"placeholders": paths_json(&placeholders), "session_folders": paths_json(&folders),
           "sandbox_mount_points": paths_json(&mounts), "lost_sessions": lost})
}

/// How a launch uses this bwrap, in words: how each checked source is bound, and how a broken
/// bwrap is noticed.
fn bwrap_mode(f: sandbox::BwrapFeatures) -> (&'static str, &'static str) {
    let binds = if f.bind_fd {
        "by descriptor (--bind-fd): what bwrap mounts is what the host checked"
    } else {
        "by path, each mount checked inside the sandbox before the command runs"
    };
    let start = if f.json_status {
        "reported by bwrap (--json-status-fd): no probe before a launch"
    } else {
        "probed before each launch"
    };
    (binds, start)
}

/// What would refuse a launch today because a session could have armed it (a program within a
/// session's reach), and what is merely weaker than it should be (a `PATH`
/// folder that cannot be kept read-only, so it is skipped).
fn reach_checks(host: &Host, settings: &Settings) -> (Vec<String>, Vec<String>) {
    let claude_config = host.state_dir.join(crate::state::CLAUDE_CONFIG_DIR);
    let grants = reach::rw_grants(&host.home, settings, None, &claude_config);
    let guarded = reach::guarded_folders(&host.home, &grants);
    // The token file's mode and owner are the token check's (what a launch would say).
    let mut problems = Vec::new();
    let mut programs: Vec<(&'static str, PathBuf)> = Vec::new();
    programs.extend(host.find_shim(settings).ok().map(|p| ("relay-shim", p)));
    programs.extend(
        sandbox::find_bwrap(settings.bwrap.as_deref())
            .ok()
            .map(|p| ("bwrap", p)),
    );
    programs.extend(relay_token::which::find_program("ssh").map(|p| ("ssh", p)));
    for t in settings.all_templates() {
        if let Some(p) = t
            .command
            .first()
            .and_then(|c| relay_token::which::find_program(c))
        {
            programs.push(("command", p));
        }
    }
    // A missing relay-stand-in is a check's (`checks::stand_in`).
    if let Some((_, Ok(p))) = super::checks::stand_in_program(settings) {
        programs.push(("relay-stand-in", p));
    }
    for (what, p) in &programs {
        problems.extend(reach::program_problem(what, p, &grants, &guarded).map(|e| e.to_string()));
    }
    let warnings = relay_token::which::path_folders()
        .iter()
        .filter_map(|d| reach::path_folder_problem(d, &grants).map(|e| e.to_string()))
        .collect();
    (problems, warnings)
}

fn redact_strings(v: &mut Value, redactor: &Redactor) {
    match v {
        Value::String(s) => *s = redactor.redact(s),
        Value::Array(a) => a.iter_mut().for_each(|x| redact_strings(x, redactor)),
        Value::Object(m) => m.values_mut().for_each(|x| redact_strings(x, redactor)),
        _ => {}
    }
}

/// The one verdict, derived here once: a Claude session would start logged in when every check
/// a Claude launch needs passes (the settings load, the token is set and a launch would hand it
/// over, bwrap works, user namespaces can be made, a shim is found, the `claude-code`
/// template's command runs) and nothing a session could have armed is found (`problems`).
/// The report's `claude_ready`, its text's last line and the exit code all say this.
fn ready(checked: &[super::checks::Check], problems: &[String]) -> bool {
    checked.iter().all(|c| c.ok || !c.claude) && problems.is_empty()
}

/// True when a Claude session would start logged in: the report's `claude_ready`.
pub(crate) fn usable(r: &Value) -> bool {
    r["claude_ready"] == json!(true)
}

/// The token file's part of the report: its health ([`super::token_file::check`]) and, while
/// it is the token the API last refused, `refused_by_api`.
fn token_report(host: &Host, settings: &Settings) -> Value {
    if settings.claude_token_file.is_empty() {
        return json!({"configured": false});
    }
    match claude_token_path_in(&settings.claude_token_file, Some(&host.home)) {
        Err(e) => json!({"configured": true, "ok": false, "error": e.to_string()}),
        Ok(None) => json!({"configured": false}),
        Ok(Some(p)) => {
            let mut check = super::token_file::check(&p);
            check["configured"] = json!(true);
            if let Some(w) = token_refused::warning(&host.state_dir, &p) {
                check["refused_by_api"] = json!(w);
            }
            check
        }
    }
}

/// The token file's health (from [`super::token_file::check`]) as text lines.
pub(crate) fn token_text(r: &Value) -> String {
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
pub(crate) fn print(host: &Host, json: bool) -> i32 {
    let r = report(host);
    let code = if usable(&r) { 0 } else { 78 };
    if json {
        outln!("{r}");
        return code;
    }
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    // What the operator acts on first: the checks (a failed one with its hint), the problems and
    // the warnings; then what was found; the verdict last.
    print_checks(&r);
    for p in r["problems"].as_array().into_iter().flatten() {
        outln!("problem:           {}", s(p));
    }
    for w in r["warnings"].as_array().into_iter().flatten() {
        outln!("warning:           {}", s(w));
    }
    outln!("config folder:     {}", s(&r["config_dir"]));
    outln!("state folder:      {}", s(&r["state_dir"]));
    outln!("settings file:     {}", s(&r["settings_file"]));
    if !r["settings_error"].is_null() {
        outln!("settings error:    {}", s(&r["settings_error"]));
    }
    let stored = s(&r["claude_token_file"]);
    if !r["settings_error"].is_null() {
        outln!("claude_token_file: (unknown: the settings did not load)");
    } else if stored.is_empty() {
        outln!("claude_token_file: (not set: Claude sessions get no token)");
        outln!("  hint: {}", crate::human::MAKE_TOKEN);
    } else {
        outln!("claude_token_file: {stored}");
    }
    let t = &r["token"];
    if t["configured"] == json!(true) {
        if t["path"].is_null() {
            outln!("token:             {}", s(&t["error"]));
        } else {
            let _ = crate::human::write_out(format_args!("{}", token_text(t)));
        }
    }
    let b = &r["bwrap"];
    if b["works"] == json!(true) {
        outln!("bwrap:             {} (works)", s(&b["path"]));
        outln!("  binds:           {}", s(&b["binds"]));
        outln!("  start:           {}", s(&b["start"]));
    } else {
        outln!("bwrap:             {}", s(&b["error"]));
    }
    let sh = &r["shim"];
    let shim = s(&sh["path"]);
    if sh["path"].is_null() {
        outln!("relay-shim:        {}", s(&sh["error"]));
    } else if shim.ends_with("/relay-host") {
        outln!("relay-shim:        {shim} (this relay-host, acting as the shim)");
    } else {
        outln!("relay-shim:        {shim}");
    }
    for t in r["templates"].as_array().into_iter().flatten() {
        outln!(
            "template:          {} (token_mode {})",
            s(&t["id"]),
            s(&t["token_mode"])
        );
    }
    if usable(&r) {
        outln!("a Claude session would start logged in");
    } else {
        outln!("a Claude session would not start logged in: see the failed checks and problems");
    }
    code
}

/// The checks, one line each (`ok` or `FAIL`), a failed one's hint below it.
fn print_checks(r: &Value) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    for c in r["checks"].as_array().into_iter().flatten() {
        let word = if c["ok"] == json!(true) {
            "ok  "
        } else {
            "FAIL"
        };
        outln!(
            "check:             {word} {}: {}",
            s(&c["name"]),
            s(&c["detail"])
        );
        if let Some(h) = c["hint"].as_str() {
            outln!("  hint: {h}");
        }
    }
}

/// Each template that writes where the operator's programs or the host run code or read
/// configuration: a warning for one whose `writes_home` accepts it (every time `status` runs),
/// a problem for one whose launches are refused for it.
fn write_place_checks(
    host: &Host,
    settings: &Settings,
    problems: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    let claude_config = host.state_dir.join(crate::state::CLAUDE_CONFIG_DIR);
    for t in settings.all_templates() {
        if t.writes_home() {
            warnings.push(format!(
                "template {:?} sets \"writes_home\": true: its sessions may write the home \
                 folder, where the operator's own shell and programs run what they find",
                t.id
            ));
        }
        let refused = (t.sandbox).refused_write(&host.home, None, &claude_config, t.writes_home());
        // A grant that cannot be expanded is the settings' own error, named elsewhere.
        if let Ok(Some((grant, path, why))) = refused {
            problems.push(format!(
                "template {:?}: its read-write grant {grant:?} ({}) is refused, so are its \
                 launches: {why}",
                t.id,
                path.display()
            ));
        }
    }
}

/// A warning when the template that gets the token (`claude-code`) has wildcards on its
/// allow-list: refused at launch unless `token_wildcards` is set, and named here either way.
fn token_wildcard_warnings(settings: &Settings) -> Option<String> {
    let t = settings.template(crate::launch::plan::request::CLAUDE_TEMPLATE)?;
    let network = t.network();
    let list = crate::net::network_rules(&network).proxied?;
    let w = list.wildcards();
    if w.is_empty() {
        return None;
    }
    Some(if settings.token_wildcards {
        format!(
            "template {:?} gets the token and may reach {} (token_wildcards is true): a wildcard \
             covers hosts other people control",
            t.id,
            w.join(", ")
        )
    } else {
        format!(
            "template {:?} lists {} on its allow-list: its launches with the token are refused \
             unless the settings say \"token_wildcards\": true",
            t.id,
            w.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    /// `usable`'s example.
    #[test]
    fn usable_doc_example() {
        let r = serde_json::json!({"claude_ready": true});
        assert!(crate::cli::status::usable(&r));
    }

    /// `token_text`'s example.
    #[test]
    fn token_text_doc_example() {
        let r = crate::cli::token_file::check("/nonexistent/token".as_ref());
        let text = crate::cli::status::token_text(&r);
        assert!(text.contains("no such file or directory"));
        assert!(text.contains("hint: "));
    }
}
