//! Edits of a settings file's text that set `claude_token_file` (`token import`), keeping the
//! rest of the text as it is: its content, order, comments and format.

/// `text` (JSON settings) with `claude_token_file` set to `value`: an empty value replaced in
/// place, else the key added first in the top-level object.
pub(crate) fn edit_json(text: &str, value: &str) -> String {
    let quoted = serde_json::to_string(value).expect("a string serializes");
    if let Some((a, b)) = empty_json_value(text) {
        return format!("{}{quoted}{}", &text[..a], &text[b..]);
    }
    let Some(open) = text.find('{').filter(|&o| text[..o].trim().is_empty()) else {
        return format!("{{\n  \"claude_token_file\": {quoted}\n}}\n");
    };
    let rest = &text[open + 1..];
    let ws_len = rest.len() - rest.trim_start().len();
    let ws = &rest[..ws_len];
    let empty = rest.trim_start().starts_with('}');
    let entry = format!("\"claude_token_file\": {quoted}");
    let inserted = match (ws.rfind('\n'), empty) {
        (Some(nl), false) => format!("\n{}{entry},{ws}", &ws[nl + 1..]),
        (Some(_), true) => format!("\n  {entry}{ws}"),
        (None, false) if ws.is_empty() => format!("{entry}, "),
        (None, false) => format!("{entry},{ws}"),
        (None, true) => format!("{entry}{ws}"),
    };
    format!("{}{inserted}{}", &text[..=open], &rest[ws_len..])
}

/// The byte range of the `""` after `"claude_token_file":`, when the key holds an empty string.
fn empty_json_value(text: &str) -> Option<(usize, usize)> {
    let key = "\"claude_token_file\"";
    let at = text.find(key)? + key.len();
    let rest = &text[at..];
    let after_ws = rest.trim_start();
    let after_colon = after_ws.strip_prefix(':')?.trim_start();
    let start = text.len() - after_colon.len();
    after_colon
        .starts_with("\"\"")
        .then_some((start, start + 2))
}

/// `text` (TOML settings) with `claude_token_file` set to `value`: an empty value's line replaced,
/// else a line added at the top (the root table's keys come before any table).
pub(crate) fn edit_toml(text: &str, value: &str) -> String {
    let quoted = toml::Value::String(value.to_string()).to_string();
    let mut out = String::with_capacity(text.len() + quoted.len() + 24);
    let mut done = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('[') {
            done = true;
        }
        let empty = t
            .strip_prefix("claude_token_file")
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix('='))
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix("\"\"").or_else(|| r.strip_prefix("''")));
        match (done, empty) {
            (false, Some(tail)) => {
                out.push_str(&line[..line.len() - t.len()]);
                out.push_str("claude_token_file = ");
                out.push_str(&quoted);
                out.push_str(tail);
                done = true;
            }
            _ => out.push_str(line),
        }
    }
    if out == text {
        return format!("claude_token_file = {quoted}\n{text}");
    }
    out
}

#[cfg(test)]
mod tests {
    /// `edit_json`'s example.
    #[test]
    fn edit_json_doc_example() {
        use crate::cli::token_file::edit_json;
        assert_eq!(
            edit_json("{\n  \"bwrap\": \"/b\"\n}\n", "/t"),
            "{\n  \"claude_token_file\": \"/t\",\n  \"bwrap\": \"/b\"\n}\n"
        );
        assert_eq!(
            edit_json("{\"claude_token_file\": \"\"}", "/t"),
            "{\"claude_token_file\": \"/t\"}"
        );
        assert_eq!(
            edit_json("", "/t"),
            "{\n  \"claude_token_file\": \"/t\"\n}\n"
        );
    }

    /// `edit_toml`'s example.
    #[test]
    fn edit_toml_doc_example() {
        use crate::cli::token_file::edit_toml;
        assert_eq!(
            edit_toml("bwrap = \"/b\"\n", "/t"),
            "claude_token_file = \"/t\"\nbwrap = \"/b\"\n"
        );
        assert_eq!(
            edit_toml("claude_token_file = \"\" # none\n", "/t"),
            "claude_token_file = \"/t\" # none\n"
        );
    }
}
