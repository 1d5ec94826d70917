//! Rendering as SBPL, the profile language of macOS `sandbox-exec`.

use std::fmt::Write;
use std::path::Path;

use super::{Mask, Resolved};

/// What every macOS session needs to start at all; grants come after it.
const BASELINE: &str = r#"(allow process-exec process-fork signal sysctl-read mach-lookup ipc-posix-shm pseudo-tty file-ioctl network*)
(allow file-read-metadata)
(allow file-read* (literal "/"))
(allow file-read* (subpath "/usr"))
(allow file-read* (subpath "/bin"))
(allow file-read* (subpath "/sbin"))
(allow file-read* (subpath "/System"))
(allow file-read* (subpath "/Library"))
(allow file-read* (subpath "/private/etc"))
(allow file-read* (subpath "/private/var/db"))
(allow file-read* (subpath "/opt/homebrew"))
(allow file-read* (subpath "/dev"))
(allow file-read* file-write* (literal "/dev/null"))
(allow file-read* file-write* (literal "/dev/zero"))
(allow file-read* file-write* (literal "/dev/tty"))
"#;

impl Resolved {
    /// The profile as SBPL text for `sandbox-exec -f`.
    ///
    /// `(version 1)`, `(deny default)`, a baseline that lets a program start, the grants shallow
    /// first (the command's folder and read grants as `file-read*`, with `(deny file-write*)`
    /// when inside a read-write grant so it stays read-only as under bwrap; read-write grants and
    /// the session's temp folder as `file-read* file-write*`), then the denies, after every grant because the last
    /// matching rule wins: `(deny file-read* file-write* (subpath DIR))` when the token's folder
    /// holds nothing but the token, else `(literal FILE)`, and `(deny file-write-unlink (literal
    /// A))` on every ancestor `A` of the masked path, so it cannot be moved out from under the
    /// rule. Paths are canonical and quoted with `\` and `"` escaped; [`super::Profile::resolve`]
    /// has refused control characters. Checked as text only.
    ///
    /// ```
    /// let r = relay_token::sandbox::Profile::new().resolve(&[])?;
    /// let text = r.sbpl();
    /// assert!(text.starts_with("(version 1)\n(deny default)\n"));
    /// # Ok::<(), relay_token::sandbox::SandboxError>(())
    /// ```
    pub fn sbpl(&self) -> String {
        let mut s = String::from("(version 1)\n(deny default)\n");
        s.push_str(BASELINE);
        for (i, b) in self.binds.iter().enumerate() {
            if b.rw {
                let _ = writeln!(
                    s,
                    "(allow file-read* file-write* (subpath {}))",
                    quote(&b.path)
                );
                continue;
            }
            let _ = writeln!(s, "(allow file-read* (subpath {}))", quote(&b.path));
            // A read-only grant inside a read-write one stays read-only, as under bwrap.
            if self.binds[..i]
                .iter()
                .any(|o| o.rw && b.path.starts_with(&o.path))
            {
                let _ = writeln!(s, "(deny file-write* (subpath {}))", quote(&b.path));
            }
        }
        if let Some(t) = &self.tmp {
            let _ = writeln!(s, "(allow file-read* file-write* (subpath {}))", quote(t));
        }
        for d in &self.denies {
            let (filter, masked) = match &d.mask {
                Mask::Folder(dir) => ("subpath", dir.as_path()),
                Mask::File { path, .. } => ("literal", path.as_path()),
            };
            let _ = writeln!(
                s,
                "(deny file-read* file-write* ({filter} {}))",
                quote(masked)
            );
            let mut ancestors: Vec<&Path> = masked.ancestors().skip(1).collect();
            ancestors.reverse();
            for a in ancestors {
                let _ = writeln!(s, "(deny file-write-unlink (literal {}))", quote(a));
            }
        }
        for p in &self.protects {
            let _ = writeln!(s, "(deny file-write* (subpath {}))", quote(&p.path));
            let mut ancestors: Vec<&Path> = p.path.ancestors().skip(1).collect();
            ancestors.reverse();
            for a in ancestors {
                let _ = writeln!(s, "(deny file-write-unlink (literal {}))", quote(a));
            }
        }
        s
    }
}

/// A path as an SBPL string literal: `"` and `\` escaped. The caller has refused control
/// characters and text that is not UTF-8.
fn quote(p: &Path) -> String {
    let text = p.to_string_lossy();
    debug_assert!(!text.chars().any(char::is_control));
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote(Path::new(r#"/a "b"\c"#)), r#""/a \"b\"\\c""#);
    }
}
