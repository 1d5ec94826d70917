//! The project repository's configuration as a token session's git reads it: a copy relay
//! makes on the host holding only the keys of [`KEPT`], placed read-only over the repository's
//! own `config` (and over each linked worktree's and submodule's git folder's `config`).
//!
//! Any session whose grant covers a repository can write its configuration, and a template's
//! `{project}` can be any folder: so whatever stands in a repository's `config` may be a
//! session's. Instead of naming what git runs from there (a filter, a `textconv`, a diff or
//! merge driver, an alias, a pager, `core.sshCommand`, an `include`, ...), which no list can
//! finish, git beside the token reads what an allow-list keeps: where the repository's data is
//! and how it is laid out, its remotes and branches, the operator's name. relay reads the file
//! (through a descriptor opened without following a link) by git's syntax ([`entries`]: no
//! `include` is followed, nothing runs), and writes the kept keys back, each value quoted. git
//! then reads only relay's copy, so a line relay reads otherwise than git would can at worst
//! lose or change a kept value, never bring in a key the list does not keep; the unit tests
//! read configurations both ways, with the real git beside.
//!
//! Left out with the rest: `extensions.worktreeConfig`, so git reads no `config.worktree`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The keys a token session's git reads from a repository's configuration: `section.key`, or
/// `section.*.key` for any subsection. Compared without regard to case (git's keys are).
pub(crate) const KEPT: &[&str] = &[
    "core.repositoryformatversion",
    "core.bare",
    "core.worktree",
    "core.filemode",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.quotepath",
    "core.sparsecheckout",
    "core.sparsecheckoutcone",
    "core.commitgraph",
    "core.abbrev",
    "extensions.objectformat",
    "extensions.refstorage",
    "extensions.preciousobjects",
    "extensions.partialclone",
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.push",
    "remote.*.mirror",
    "remote.*.tagopt",
    "remote.*.promisor",
    "remote.*.partialclonefilter",
    "branch.*.remote",
    "branch.*.pushremote",
    "branch.*.merge",
    "branch.*.rebase",
    "branch.*.description",
    "submodule.*.url",
    "submodule.*.active",
    "submodule.*.branch",
    "user.name",
    "user.email",
    "init.defaultbranch",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "fetch.prune",
];

/// The longest configuration relay copies (git's own files are a few hundred bytes).
const MAX_LEN: u64 = 1 << 20;

/// True when `key` (as git lists it: `section.key` or `section.subsection.key`) is kept.
pub(crate) fn kept(key: &str) -> bool {
    let (Some((section, rest)), Some((_, name))) = (key.split_once('.'), key.rsplit_once('.'))
    else {
        return false;
    };
    let sub = rest.len() > name.len();
    KEPT.iter().any(|k| {
        let mut parts = k.split('.');
        let (s, mid, n) = (parts.next(), parts.next(), parts.next());
        match (s, mid, n) {
            (Some(s), Some("*"), Some(n)) => {
                sub && s.eq_ignore_ascii_case(section) && n.eq_ignore_ascii_case(name)
            }
            (Some(s), Some(n), None) => {
                !sub && s.eq_ignore_ascii_case(section) && n.eq_ignore_ascii_case(name)
            }
            _ => false,
        }
    })
}

/// The kept entries ([`kept`]) of the configuration `text`, in order, each `(key, value)` as
/// `git config --list` names them (section and key lower case, a subsection as written), read
/// by git's own rules (its `config.c`): `[section]`, `[section "subsection"]` (a `\` taking the
/// next character as it is) and the old `[section.subsection]`; `key = value`, or a bare `key`
/// (true); in a value, blanks outside quotes kept between words and dropped at its ends,
/// quotes removed, the escapes `\n`, `\t`, `\b`, `\"` and `\\`, a `\` at a line's end joining the
/// next, and a `#` or `;` outside quotes starting a comment. Where git would refuse the file
/// (a line that does not read), the reading ends there.
pub(crate) fn entries(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section: Option<String> = None;
    let mut chars = text.chars().peekable();
    let mut comment = false;
    while let Some(c) = chars.next() {
        match c {
            '\n' => comment = false,
            _ if comment => {}
            c if c.is_ascii_whitespace() => {}
            '#' | ';' => comment = true,
            '[' => match header(&mut chars) {
                Some(s) if !s.is_empty() => section = Some(s),
                _ => return out,
            },
            c if c.is_ascii_alphabetic() => {
                let Some((name, value)) = key_value(c, &mut chars) else {
                    return out;
                };
                let Some(section) = &section else {
                    return out;
                };
                let key = format!("{section}.{name}");
                if kept(&key) {
                    out.push((key, value));
                }
            }
            _ => return out,
        }
    }
    out
}

/// A section header after its `[`, as `config --list` names it; `None` when it does not read.
fn header(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<String> {
    let mut name = String::new();
    loop {
        match chars.next()? {
            ']' => return Some(name),
            c if c.is_ascii_whitespace() => return extended(c, name, chars),
            c if c.is_ascii_alphanumeric() || c == '-' || c == '.' => {
                name.push(c.to_ascii_lowercase())
            }
            _ => return None,
        }
    }
}

/// The rest of `[name "subsection"]` after the blank `c`.
fn extended(
    mut c: char,
    name: String,
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> Option<String> {
    while c.is_ascii_whitespace() {
        if c == '\n' {
            return None;
        }
        c = chars.next()?;
    }
    if c != '"' {
        return None;
    }
    let mut full = name + ".";
    loop {
        match chars.next()? {
            '\n' => return None,
            '"' => break,
            '\\' => full.push(chars.next().filter(|c| *c != '\n')?),
            c => full.push(c),
        }
    }
    (chars.next()? == ']').then_some(full)
}

/// A key starting with `first` and its value (`true` for a bare key), the line's end taken;
/// `None` when it does not read.
fn key_value(
    first: char,
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> Option<(String, String)> {
    let mut name = String::from(first.to_ascii_lowercase());
    while let Some(c) = chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '-') {
        name.push(c.to_ascii_lowercase());
    }
    while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
    match chars.next() {
        None | Some('\n') => Some((name, "true".to_string())),
        Some('=') => Some((name, value(chars)?)),
        Some(_) => None,
    }
}

/// A value after its `=`, to the line's end (taken); `None` when it does not read (a quote
/// left open at the line's end, an unknown escape).
fn value(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<String> {
    let (mut out, mut quoted, mut comment) = (String::new(), false, false);
    let mut blanks = String::new();
    loop {
        let c = chars.next().unwrap_or('\n');
        if c == '\n' {
            return (!quoted).then_some(out);
        }
        if comment {
            continue;
        }
        if c.is_ascii_whitespace() && !quoted {
            if !out.is_empty() {
                blanks.push(c);
            }
            continue;
        }
        if !quoted && (c == '#' || c == ';') {
            comment = true;
            continue;
        }
        out.push_str(&blanks);
        blanks.clear();
        match c {
            '\\' => match chars.next().unwrap_or('\n') {
                '\n' => {}
                't' => out.push('\t'),
                'b' => out.push('\u{8}'),
                'n' => out.push('\n'),
                c @ ('\\' | '"') => out.push(c),
                _ => return None,
            },
            '"' => quoted = !quoted,
            c => out.push(c),
        }
    }
}

/// The configuration file that holds `entries`: one section header an entry, each value
/// quoted and escaped as git reads it back.
pub(crate) fn render(entries: &[(String, String)]) -> String {
    let mut out = String::new();
    for (key, value) in entries {
        let (Some((section, rest)), Some((head, name))) =
            (key.split_once('.'), key.rsplit_once('.'))
        else {
            continue;
        };
        let header = match rest.len() > name.len() {
            true => format!(
                "[{section} \"{}\"]",
                quote_subsection(&head[section.len() + 1..])
            ),
            false => format!("[{section}]"),
        };
        out += &format!("{header}\n\t{name} = \"{}\"\n", quote(value));
    }
    out
}

/// `s` escaped for a quoted git configuration value.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            c => out.push(c),
        }
    }
    out
}

/// `s` escaped for a quoted subsection, where git takes the character after a `\\` as it is.
fn quote_subsection(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | '"') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The kept copy of the configuration `text` ([`entries`], [`render`]).
pub(crate) fn sanitized(text: &[u8]) -> String {
    render(&entries(&String::from_utf8_lossy(text)))
}

/// For each git folder of `dirs` whose `config` is a regular file (reached without following a
/// link), the kept copy written into `into` (the session folder, which no sandbox reaches) as
/// `git-config-N`, with the `config` it stands in for.
pub(crate) fn write_copies(dirs: &[PathBuf], into: &Path) -> io::Result<Vec<(PathBuf, PathBuf)>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut out = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let config = dir.join("config");
        let Some(text) = relay_token::sandbox::nofollow::read_file(&config, MAX_LEN)? else {
            continue;
        };
        let copy = into.join(format!("git-config-{i}"));
        match std::fs::remove_file(&copy) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&copy)?
            .write_all(sanitized(&text).as_bytes())?;
        out.push((copy, config));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// What runs code is left out, what lays out the repository is kept, subsections too.
    #[test]
    fn only_the_kept_keys_pass() {
        for k in [
            "core.repositoryformatversion",
            "CORE.BARE",
            "remote.origin.url",
            "remote.a.b.url",
            "branch.main.merge",
            "user.email",
        ] {
            assert!(kept(k), "{k}");
        }
        for k in [
            "filter.x.clean",
            "diff.x.textconv",
            "merge.x.driver",
            "alias.st",
            "core.pager",
            "core.sshcommand",
            "core.fsmonitor",
            "core.hookspath",
            "include.path",
            "includeif.gitdir:/x.path",
            "extensions.worktreeconfig",
            "remote.origin.uploadpack",
            "remote.url",
            "user.x.name",
            "submodule.s.update",
            "core",
        ] {
            assert!(!kept(k), "{k}");
        }
    }

    /// `git config --file - --list --null` of `text`, each `(key, value)`; `None` when git
    /// refuses the file.
    fn listed_by_git(text: &str) -> Option<Vec<(String, String)>> {
        let git = relay_token::which::find_program("git").expect("these tests need git on PATH");
        let mut child = Command::new(git)
            .args(["config", "--file", "-", "--list", "--null"])
            .env_clear()
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        out.status.success().then(|| {
            (out.stdout.split(|b| *b == 0).filter(|i| !i.is_empty()))
                .map(|i| {
                    let t = String::from_utf8_lossy(i);
                    let (k, v) = t.split_once('\n').unwrap_or((&t, "true"));
                    (k.to_string(), v.to_string())
                })
                .collect()
        })
    }

    /// Configurations the way people and sessions write them, read by relay and by the real
    /// git: relay keeps exactly the kept keys git lists, with git's values; the copy it writes
    /// reads back the same in git; and nothing that runs code survives.
    #[test]
    fn relay_reads_a_configuration_as_git_does() {
        let cases = [
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n",
            "[remote \"origin\"]\n\turl = https://x/y.git ; a comment\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
            "[remote \"o\\\"r.g\"]\n\turl = \"a  b\"   c\t d # c\n",
            "[Remote.Origin]\n\tURL = legacy\n",
            "[remote.x \"y\"]\n\turl = odd\n",
            "[user]\n\tname = \"A \\\"B\\\"\\tC\\\\\"\n\temail = a@b\\\n.c\n",
            "[user]\n\tname = x\\by\n\temail\n",
            "[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
            "[filter \"x\"]\n\tclean = touch /tmp/evil\n[include]\n\tpath = /tmp/evil\n[alias]\n\tst = !evil\n",
            "[extensions]\n\tworktreeConfig = true\n\tobjectFormat = sha256\n",
            "key = before a section\n",
            "[user]\n\tname = open \"quote\n[core]\n\tbare = true\n",
            "[user]\n\tname = bad \\q escape\n",
            "; only a comment\n# and another\n\n[core]\n  bare=false\n",
            "[user]\n name = trailing   \n email = \"  kept  \"  \n",
            "[core]\r\n\tbare = true\r\n[user]\r\n\tname = crlf\r\n",
            "[core] # a comment after the header\n\tbare = false\n",
            "[ core]\n\tbare = true\n",
            "[user]\n\tname = \"joined \\\n line\"\n",
            "[branch \"f\u{e9}e\tx\"]\n\tremote = \u{e9}t\u{e9}\n",
            "[remote \"a\\\\b\"]\n\turl = \\\"q\\\"\n",
            "[core]\n\tbare = false ; \"quoted in a comment\n\tfilemode\n",
        ];
        for text in cases {
            let ours = entries(text);
            let git = listed_by_git(text);
            match git {
                Some(all) => {
                    let want: Vec<_> = all.into_iter().filter(|(k, _)| kept(k)).collect();
                    assert_eq!(ours, want, "{text:?}");
                }
                // git refuses the whole file; relay keeps at most what came before the line.
                None => assert!(ours.len() <= 1, "{text:?}: {ours:?}"),
            }
            let copy = sanitized(text.as_bytes());
            assert_eq!(listed_by_git(&copy), Some(ours.clone()), "{copy:?}");
            assert!(!copy.contains("evil"), "{copy}");
        }
    }

    /// A link where the configuration stands is not followed: no copy is made.
    #[test]
    fn a_linked_config_is_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("repo")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", real.join("repo/config")).unwrap();
        std::fs::create_dir(real.join("out")).unwrap();
        let made = write_copies(&[real.join("repo")], &real.join("out")).unwrap();
        assert!(made.is_empty());
        std::fs::remove_file(real.join("repo/config")).unwrap();
        std::fs::write(real.join("repo/config"), "[alias]\n\tx = !evil\n").unwrap();
        let made = write_copies(&[real.join("repo")], &real.join("out")).unwrap();
        assert_eq!(
            made,
            [(real.join("out/git-config-0"), real.join("repo/config"))]
        );
        assert_eq!(std::fs::read_to_string(&made[0].0).unwrap(), "");
    }
}
