//! The project repository's configuration as a token session's git reads it: a copy relay
//! makes on the host holding only the keys of [`KEPT`], placed read-only over the repository's
//! own `config` (and over each linked worktree's and submodule's git folder's `config`).
//!
//! Any session whose grant covers a repository can write its configuration, and a template's
//! `{project}` can be any folder: so whatever stands in a repository's `config` may be a
//! session's. Instead of naming what git runs from there (a filter, a `textconv`, a diff or
//! merge driver, an alias, a pager, `core.sshCommand`, an `include`, ...), which no list can
//! finish, git beside the token reads what an allow-list keeps: where the repository's data is
//! and how it is laid out, its remotes and branches, the operator's name. The host's own git
//! reads the file (`git config --file - --list --null`, on standard input: git itself decides
//! what each line means, no `include` is followed, and no path of the session's is opened by
//! it), and relay writes the kept keys back, each value quoted.
//!
//! Left out with the rest: `extensions.worktreeConfig`, so git reads no `config.worktree`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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

/// The kept entries of a configuration as git lists it (`key\nvalue\0` each, [`kept`] keys
/// only, in order).
pub(crate) fn entries(listed: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for item in listed.split(|b| *b == 0).filter(|i| !i.is_empty()) {
        let text = String::from_utf8_lossy(item);
        let (key, value) = text.split_once('\n').unwrap_or((&text, ""));
        if kept(key) {
            out.push((key.to_string(), value.to_string()));
        }
    }
    out
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
            true => format!("[{section} \"{}\"]", quote(&head[section.len() + 1..])),
            false => format!("[{section}]"),
        };
        out += &format!("{header}\n\t{name} = \"{}\"\n", quote(value));
    }
    out
}

/// `s` escaped for a quoted git configuration string (a subsection or a value).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

/// The kept copy of the configuration `text`, listed by the host's `git`.
pub(crate) fn sanitized(git: &Path, text: &[u8]) -> io::Result<String> {
    let mut child = Command::new(git)
        .args(["config", "--file", "-", "--list", "--null"])
        .env_clear()
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let feed = stdin.write_all(text);
    drop(stdin);
    let out = child.wait_with_output()?;
    feed?;
    if !out.status.success() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("git cannot read it ({})", out.status),
        ));
    }
    Ok(render(&entries(&out.stdout)))
}

/// For each git folder of `dirs` whose `config` is a regular file (reached without following a
/// link), the kept copy written into `into` (the session folder, which no sandbox reaches) as
/// `git-config-N`, with the `config` it stands in for.
pub(crate) fn write_copies(
    git: &Path,
    dirs: &[PathBuf],
    into: &Path,
) -> io::Result<Vec<(PathBuf, PathBuf)>> {
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
            .write_all(sanitized(git, &text)?.as_bytes())?;
        out.push((copy, config));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The real git reads the copy back as the kept entries, quotes and all, and nothing else.
    #[test]
    fn a_copy_reads_back_as_its_kept_entries() {
        let Some(git) = relay_token::which::find_program("git") else {
            panic!("these tests need git on PATH");
        };
        let text = b"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = /tmp/evil\n\
            [remote \"o\\\"r.g\"]\n\turl = https://x/y ; comment\n\tuploadpack = /tmp/evil\n\
            [filter \"lfs\"]\n\tclean = /tmp/evil %f\n[include]\n\tpath = /tmp/evil.cfg\n\
            [user]\n\tname = \"A \\\"B\\\"\\tC\\\\\"\n[alias]\n\tst = !/tmp/evil\n";
        let copy = sanitized(&git, text).unwrap();
        let back = sanitized(&git, copy.as_bytes()).unwrap();
        assert_eq!(copy, back);
        let listed = Command::new(&git)
            .args(["config", "--file", "-", "--list", "--null"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                c.stdin.take().unwrap().write_all(copy.as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        assert_eq!(
            String::from_utf8(listed.stdout).unwrap(),
            "core.repositoryformatversion\n0\0remote.o\"r.g.url\nhttps://x/y\0\
             user.name\nA \"B\"\tC\\\0"
        );
        assert!(!copy.contains("evil"));
    }

    /// A link where the configuration stands is not followed: no copy is made.
    #[test]
    fn a_linked_config_is_not_copied() {
        let git = relay_token::which::find_program("git").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("repo")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", real.join("repo/config")).unwrap();
        std::fs::create_dir(real.join("out")).unwrap();
        let made = write_copies(&git, &[real.join("repo")], &real.join("out")).unwrap();
        assert!(made.is_empty());
        std::fs::remove_file(real.join("repo/config")).unwrap();
        std::fs::write(real.join("repo/config"), "[alias]\n\tx = !evil\n").unwrap();
        let made = write_copies(&git, &[real.join("repo")], &real.join("out")).unwrap();
        assert_eq!(
            made,
            [(real.join("out/git-config-0"), real.join("repo/config"))]
        );
        assert_eq!(std::fs::read_to_string(&made[0].0).unwrap(), "");
    }
}
