//! A reader for the SBPL the crate renders, shared by `sbpl_golden.rs` and `sbpl_lint.rs`, and
//! the synthetic profiles the golden files are rendered from (paths taken as they are, so the
//! text is the same on Linux and macOS).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use relay_token::sandbox::Resolved;

/// One s-expression: an atom (`allow`, `file-read*`, `AF_SYSTEM`), a string (`"..."` with its
/// escapes undone, or a `#"..."` regex as written), or a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sexp {
    Atom(String),
    Str(String),
    List(Vec<Sexp>),
}

/// The top-level forms of `text`, or why it does not read: an unbalanced parenthesis, an
/// unterminated string, an atom or string outside any form.
pub fn parse(text: &str) -> Result<Vec<Sexp>, String> {
    let mut stack: Vec<Vec<Sexp>> = vec![Vec::new()];
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let item = match c {
            ';' => {
                while chars.next_if(|&(_, c)| c != '\n').is_some() {}
                continue;
            }
            c if c.is_whitespace() => continue,
            '(' => {
                stack.push(Vec::new());
                continue;
            }
            ')' => {
                if stack.len() == 1 {
                    return Err(format!("unbalanced `)` at byte {at}"));
                }
                Sexp::List(stack.pop().unwrap())
            }
            '"' => Sexp::Str(string(&mut chars, at)?),
            '#' if chars.next_if(|&(_, c)| c == '"').is_some() => {
                let mut raw = String::new();
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((_, c)) => raw.push(c),
                        None => return Err(format!("unterminated regex at byte {at}")),
                    }
                }
                Sexp::Str(raw)
            }
            _ => {
                let mut atom = String::from(c);
                while let Some((_, c)) =
                    chars.next_if(|&(_, c)| !c.is_whitespace() && !"()\";".contains(c))
                {
                    atom.push(c);
                }
                Sexp::Atom(atom)
            }
        };
        if stack.len() == 1 && !matches!(item, Sexp::List(_)) {
            return Err(format!("{item:?} outside any form at byte {at}"));
        }
        stack.last_mut().unwrap().push(item);
    }
    if stack.len() != 1 {
        return Err(format!("{} unclosed `(`", stack.len() - 1));
    }
    Ok(stack.pop().unwrap())
}

fn string(
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
    at: usize,
) -> Result<String, String> {
    let mut out = String::new();
    loop {
        match chars.next() {
            Some((_, '"')) => return Ok(out),
            Some((_, '\\')) => match chars.next() {
                Some((_, c)) => out.push(c),
                None => break,
            },
            Some((_, c)) => out.push(c),
            None => break,
        }
    }
    Err(format!("unterminated string at byte {at}"))
}

/// An `(allow ...)` or `(deny ...)` form: its operations and its filters.
#[derive(Debug, Clone)]
pub struct Rule {
    pub allow: bool,
    pub ops: Vec<String>,
    pub filters: Vec<Sexp>,
}

/// The rules of a profile after `(version 1)`, or why a form is not a rule.
pub fn rules(forms: &[Sexp]) -> Result<Vec<Rule>, String> {
    let mut out = Vec::new();
    for f in forms {
        let Sexp::List(items) = f else {
            return Err(format!("not a form: {f:?}"));
        };
        if items.first() == Some(&Sexp::Atom("version".into())) {
            continue;
        }
        let allow = match items.first() {
            Some(Sexp::Atom(a)) if a == "allow" => true,
            Some(Sexp::Atom(a)) if a == "deny" => false,
            _ => return Err(format!("not a rule: {f:?}")),
        };
        let mut ops = Vec::new();
        let mut filters = Vec::new();
        for item in &items[1..] {
            match item {
                Sexp::Atom(op) if filters.is_empty() => ops.push(op.clone()),
                Sexp::List(_) => filters.push(item.clone()),
                _ => return Err(format!("rule {f:?}: {item:?} out of place")),
            }
        }
        if ops.is_empty() {
            return Err(format!("rule without an operation: {f:?}"));
        }
        out.push(Rule {
            allow,
            ops,
            filters,
        });
    }
    Ok(out)
}

/// The head atom of a list (`literal` in `(literal "/x")`).
pub fn head(s: &Sexp) -> Option<&str> {
    match s {
        Sexp::List(items) => match items.first() {
            Some(Sexp::Atom(a)) => Some(a),
            _ => None,
        },
        _ => None,
    }
}

/// The `(literal P)` and `(subpath P)` filters of a rule at its top level, as `(kind, P)`, and
/// the first one of a `(require-all (subpath P) (require-not ...)...)` (a folder with a hole).
pub fn paths(rule: &Rule) -> Vec<(&str, PathBuf)> {
    let mut out = Vec::new();
    for f in &rule.filters {
        let f = match (head(f), f) {
            (Some("require-all"), Sexp::List(items)) => match items.get(1) {
                Some(first) => first,
                None => continue,
            },
            _ => f,
        };
        if let (Some(kind @ ("literal" | "subpath")), Sexp::List(items)) = (head(f), f) {
            if let [_, Sexp::Str(p)] = items.as_slice() {
                out.push((kind, PathBuf::from(p)));
            }
        }
    }
    out
}

/// The first rule whose first operation is `op`.
pub fn find<'a>(rules: &'a [Rule], allow: bool, op: &str) -> Option<&'a Rule> {
    rules
        .iter()
        .find(|r| r.allow == allow && r.ops.first().map(String::as_str) == Some(op))
}

/// The strings inside filters of `head` (`global-name`, `sysctl-name`, ...) of a rule.
pub fn filter_values<'a>(rule: &'a Rule, name: &str) -> Vec<&'a str> {
    rule.filters
        .iter()
        .filter(|f| head(f) == Some(name))
        .filter_map(|f| match f {
            Sexp::List(items) => match items.get(1) {
                Some(Sexp::Str(s)) => Some(s.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The home folder of the synthetic profiles.
pub const HOME: &str = "/Users/op";

/// A synthetic profile as a Mac would resolve it: `home` read-write, its `.config` read-only,
/// the command's folder read-only, the session's temp folder, and `masked` (the token's folder
/// when `whole_folder`, else the token file). `protect` adds a protected program folder.
pub fn synthetic(home: &str, mask: Option<bool>, protect: bool) -> Resolved {
    let home = Path::new(home);
    let grants = [
        (home.to_path_buf(), true),
        (home.join(".config"), false),
        (PathBuf::from("/opt/relay/bin"), false),
    ];
    let tmp = home.join(".local/state/relay/sessions/s1/tmp");
    let masked: Vec<(PathBuf, bool)> = match mask {
        Some(true) => vec![(home.join(".config/claude-ltt"), true)],
        Some(false) => vec![(home.join(".config/claude-ltt/token"), false)],
        None => Vec::new(),
    };
    let protects: Vec<PathBuf> = if protect {
        vec![home.join(".local/bin")]
    } else {
        Vec::new()
    };
    Resolved::unchecked_for_sbpl(&grants, Some(tmp), &masked, &protects)
}
