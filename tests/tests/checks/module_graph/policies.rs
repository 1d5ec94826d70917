//! Every policy on a kind names each variant: a `match` with a catch-all arm, a `matches!`, an
//! `==`/`!=` or an `if let` on a kind that decides what a token launch may do would let a kind
//! added later pass unnoticed.

use super::{code_lines, folder_files, source_folders};

/// Variants of the kinds that decide what a token launch may do: a template's network and
/// sandbox, the sandbox's network, an allow-list entry's host pattern, the token mode, the operator's
/// `token_network` and a request's kind. A place that decides by one of these kinds names one
/// of them, so listing the variants known today finds it.
const POLICY_VARIANTS: &[&str] = &[
    "Network::Host",
    "Network::None",
    "Network::Allow",
    "Sandbox::Off",
    "Sandbox::Grants",
    "SandboxNet::Host",
    "SandboxNet::Loopback",
    "SandboxNet::Proxy",
    "Pattern::Name",
    "Pattern::Below",
    "Pattern::Ip",
    "TokenMode::None",
    "TokenMode::Pipe",
    "TokenMode::StandIn",
    "TokenNetwork::Host",
    "Kind::Claude",
    "Kind::Terminal",
    "Kind::Pi",
    "Kind::Codex",
    "Kind::Chat",
];

/// `code` with the inside of each string literal (plain or raw) blanked, lines kept.
fn blank_strings(code: &str) -> String {
    let b = code.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let raw = b[i] == b'r' && b.get(i + 1).is_some_and(|c| *c == b'#' || *c == b'"');
        let starts_ident = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        let (open, close): (usize, Vec<u8>) = if raw && !starts_ident {
            let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            (i + 2 + hashes, close)
        } else if b[i] == b'"' && !(i > 0 && b[i - 1] == b'\'') {
            (i + 1, vec![b'"'])
        } else {
            i += 1;
            continue;
        };
        let mut j = open;
        while j < b.len() && !b[j..].starts_with(&close) {
            if close.len() == 1 && b[j] == b'\\' {
                j += 1;
            }
            j += 1;
        }
        for c in out.iter_mut().take(j.min(b.len())).skip(open) {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        i = j + close.len();
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The index just past the bracket that closes the one at `open`.
fn close_of(code: &[u8], open: usize) -> usize {
    let mut depth = 0i32;
    for (k, c) in code.iter().enumerate().skip(open) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return k + 1;
        }
    }
    code.len()
}

/// The arm patterns of the `match` whose arms open at `open` (guards cut off).
fn arm_patterns(code: &str, open: usize) -> Vec<String> {
    let b = code.as_bytes();
    let end = close_of(b, open);
    // The arms at their own depth: nested blocks dropped, brackets kept.
    let mut flat = String::new();
    let mut k = open + 1;
    while k < end - 1 {
        match b[k] {
            b'{' => {
                flat.push_str("{}");
                k = close_of(b, k);
            }
            c => {
                flat.push(c as char);
                k += 1;
            }
        }
    }
    let pieces: Vec<&str> = flat.split("=>").collect();
    let mut out = Vec::new();
    for (n, piece) in pieces.iter().enumerate().take(pieces.len() - 1) {
        let pattern = match n {
            0 => *piece,
            _ => {
                // The previous arm's body ends at its first comma outside brackets, or with a
                // block that ends its line.
                let mut depth = 0;
                let cut = piece.char_indices().find(|&(at, c)| {
                    match c {
                        '(' | '[' => depth += 1,
                        ')' | ']' => depth -= 1,
                        _ => {}
                    }
                    depth == 0 && (c == ',' || piece[at..].starts_with("{}\n"))
                });
                cut.map_or("", |(at, c)| &piece[at + if c == ',' { 1 } else { 2 }..])
            }
        };
        let pattern = pattern.split(" if ").next().unwrap_or("").trim();
        out.push(pattern.trim_start_matches('|').trim().to_string());
    }
    out
}

/// A catch-all arm: `_`, or only bindings and wildcards (`other`, `(a, _)`, `(true, x)`).
fn catch_all(pattern: &str) -> bool {
    !pattern.is_empty()
        && pattern
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_(), \n".contains(c))
}

/// Where `code` decides by a policy kind without naming every variant: a `match` with a
/// catch-all arm, a `matches!`, an `==`/`!=` or an `if let`/`let .. else` on a variant.
fn open_policies(code: &str) -> Vec<String> {
    let code = blank_strings(code);
    let b = code.as_bytes();
    let line = |at: usize| code[..at].lines().count().max(1);
    let names = |s: &str| POLICY_VARIANTS.iter().any(|v| s.contains(v));
    let mut out = Vec::new();
    for (at, _) in code.match_indices("match") {
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + 5..];
        if rest.starts_with("es!(") {
            let open = at + 8;
            if names(&code[open..close_of(b, open)]) {
                out.push(format!("line {}: matches! on a kind", line(at)));
            }
            continue;
        }
        if !rest.starts_with([' ', '\n']) {
            continue;
        }
        let mut depth = 0i32;
        let Some(open) = (at + 5..b.len()).find(|&k| {
            match b[k] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                _ => {}
            }
            b[k] == b'{' && depth == 0
        }) else {
            continue;
        };
        let patterns = arm_patterns(&code, open);
        if patterns.iter().any(|p| names(p)) {
            if let Some(p) = patterns.iter().find(|p| catch_all(p)) {
                out.push(format!(
                    "line {}: match on a kind with arm `{p} =>`",
                    line(at)
                ));
            }
        }
    }
    for v in POLICY_VARIANTS {
        for (at, _) in code.match_indices(v) {
            if code[at + v.len()..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
                continue;
            }
            let path = code[..at]
                .trim_end_matches(|c: char| c.is_ascii_alphanumeric() || "_:".contains(c));
            if code[at + v.len()..].starts_with('.') {
                // A method of the variant (`TokenMode::StandIn.word()`), not the variant.
                continue;
            }
            let after = code[at + v.len()..].trim_start();
            let before = path.trim_end();
            let word_let = before.ends_with("let")
                && !before[..before.len() - 3]
                    .ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            if word_let || before.ends_with("==") || before.ends_with("!=") {
                out.push(format!(
                    "line {}: `{} {v}`",
                    line(at),
                    &before[before.len().saturating_sub(3)..]
                ));
            } else if after.starts_with("==") || after.starts_with("!=") {
                out.push(format!("line {}: `{v} {}`", line(at), &after[..2]));
            }
        }
    }
    out
}

#[test]
fn the_policy_check_sees_each_way_a_kind_could_pass_unnoticed() {
    let open = |code: &str| open_policies(code).len();
    assert_eq!(open("match n { Network::Host => a(), _ => b() }"), 1);
    assert_eq!(open("match (n, t) {\n    (Network::Host, true) => {\n        a()\n    }\n    (other, _) => b(),\n}"), 1);
    assert_eq!(open("let x = matches!(n, Network::Allow(_));"), 1);
    assert_eq!(
        open("if t.token_mode == crate::settings::TokenMode::StandIn {}"),
        1
    );
    assert_eq!(open("if net != Network::Host {}"), 1);
    assert_eq!(open("if let crate::net::Network::Allow(list) = n {}"), 1);
    assert_eq!(
        open("let SandboxNet::Proxy { inside, .. } = self else { return };"),
        1
    );
    // Every variant named, a binding of a named variant, or a catch-all over another type.
    let closed = "match (n, s) {\n    (Network::Host, Some(x)) => f(x, |y| { y }),\n    \
                  (net @ Network::Allow(_), None) | (net @ (Network::Host | Network::None), _) => net,\n}\n\
                  match s { \"a\" => Ok(Network::Host), \"b{\" => 1, other => e(other) }\n\
                  let w = r#\"{\"allow\": [..]}\"#; Network::Allow(list)";
    assert_eq!(open_policies(closed), Vec::<String>::new());
}

#[test]
fn every_policy_on_a_kind_names_each_variant() {
    let mut open = Vec::new();
    let mut files = 0;
    for dir in source_folders() {
        for (name, text) in folder_files(&dir) {
            files += 1;
            // Comment lines blanked (a doc's example is not code), lines kept.
            let code: Vec<&str> = code_lines(&text)
                .into_iter()
                .map(|l| {
                    if l.trim_start().starts_with("//") {
                        ""
                    } else {
                        l
                    }
                })
                .collect();
            for p in open_policies(&code.join("\n")) {
                open.push(format!("{}/{name}.rs: {p}", dir.display()));
            }
        }
    }
    assert!(files > 100, "saw {files} files");
    assert!(
        open.is_empty(),
        "a kind added later would pass these unnoticed (name every variant instead):\n{}",
        open.join("\n")
    );
}
