//! Rendering as SBPL, the profile language of macOS `sandbox-exec`.
//!
//! The operation names and the lists of Mach services and sysctl names follow two public
//! profiles for the same job: Anthropic's sandbox-runtime (`src/sandbox/macos-sandbox-utils.ts`)
//! and codex's seatbelt policy (`codex-rs/core/src/seatbelt_base_policy.sbpl` and its network
//! and platform companions); `docs/macos.md` says which entries come from where and which were
//! left out. Checked as text only until someone runs `scripts/macos-live-check` on a Mac.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::{guards_between, Bind, Deny, Mask, Protect, Resolved};

/// Processes, IPC and kernel queries every session needs; each `;` line names what its rule
/// stops or why it is there.
const PROCESSES: &str = r#"(allow process-exec process-fork)
; Signals, process information and task ports reach this sandbox's own processes only:
; a session cannot kill relay-host, nor read another process's memory or arguments.
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow mach-priv-task-port (target same-sandbox))
; Node's os.cpus() asks the host port for processor information.
(allow mach-host*)
(allow ipc-posix-shm ipc-posix-sem)
(allow user-preference-read)
(allow pseudo-tty)
(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))
(allow system-socket (require-all (socket-domain AF_SYSTEM) (socket-protocol 2)))
; Mach services by name only: launchservicesd would open an app outside the sandbox, and
; SecurityServer serves the login keychain.
(allow mach-lookup
  (global-name "com.apple.SystemConfiguration.DNSConfiguration")
  (global-name "com.apple.SystemConfiguration.configd")
  (global-name "com.apple.bsd.dirhelper")
  (global-name "com.apple.cfprefsd.agent")
  (global-name "com.apple.cfprefsd.daemon")
  (global-name "com.apple.logd")
  (global-name "com.apple.networkd")
  (global-name "com.apple.ocspd")
  (global-name "com.apple.system.logger")
  (global-name "com.apple.system.notification_center")
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.system.opendirectoryd.membership")
  (global-name "com.apple.trustd")
  (global-name "com.apple.trustd.agent"))
; sysctl by name only: kern.procargs2 would show every process's argv and environment.
(allow sysctl-read
  (sysctl-name "hw.activecpu")
  (sysctl-name "hw.busfrequency_compat")
  (sysctl-name "hw.byteorder")
  (sysctl-name "hw.cacheconfig")
  (sysctl-name "hw.cachelinesize_compat")
  (sysctl-name "hw.cpufamily")
  (sysctl-name "hw.cpufrequency")
  (sysctl-name "hw.cpufrequency_compat")
  (sysctl-name "hw.cputype")
  (sysctl-name "hw.l1dcachesize_compat")
  (sysctl-name "hw.l1icachesize_compat")
  (sysctl-name "hw.l2cachesize_compat")
  (sysctl-name "hw.l3cachesize_compat")
  (sysctl-name "hw.logicalcpu")
  (sysctl-name "hw.logicalcpu_max")
  (sysctl-name "hw.machine")
  (sysctl-name "hw.memsize")
  (sysctl-name "hw.model")
  (sysctl-name "hw.ncpu")
  (sysctl-name "hw.nperflevels")
  (sysctl-name "hw.packages")
  (sysctl-name "hw.pagesize")
  (sysctl-name "hw.pagesize_compat")
  (sysctl-name "hw.physicalcpu")
  (sysctl-name "hw.physicalcpu_max")
  (sysctl-name "hw.tbfrequency_compat")
  (sysctl-name "hw.vectorunit")
  (sysctl-name "kern.argmax")
  (sysctl-name "kern.hostname")
  (sysctl-name "kern.maxfiles")
  (sysctl-name "kern.maxfilesperproc")
  (sysctl-name "kern.maxproc")
  (sysctl-name "kern.ngroups")
  (sysctl-name "kern.osproductversion")
  (sysctl-name "kern.osrelease")
  (sysctl-name "kern.ostype")
  (sysctl-name "kern.osvariant_status")
  (sysctl-name "kern.osversion")
  (sysctl-name "kern.secure_kernel")
  (sysctl-name "kern.usrstack64")
  (sysctl-name "kern.version")
  (sysctl-name "machdep.cpu.brand_string")
  (sysctl-name "machdep.ptrauth_enabled")
  (sysctl-name "sysctl.proc_cputype")
  (sysctl-name "vm.loadavg")
  (sysctl-name-prefix "hw.optional.arm")
  (sysctl-name-prefix "hw.perflevel")
  (sysctl-name-prefix "kern.proc.pgrp.")
  (sysctl-name-prefix "kern.proc.pid.")
  (sysctl-name-prefix "machdep.cpu.")
  (sysctl-name-prefix "net.routetable."))
; Two probes the kernel counts as writes: the JVM's CPU type, V8's per-thread TCSM setting.
(allow sysctl-write (sysctl-name "kern.grade_cputype") (sysctl-name "kern.tcsm_enable"))
; ioctl on these devices only, never /dev/tty: TIOCSTI there types into the operator's shell.
(allow file-ioctl
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/random")
  (literal "/dev/urandom")
  (literal "/dev/dtracehelper")
  (literal "/dev/ptmx")
  (regex #"^/dev/ttys[0-9]+$"))
"#;

/// The files every session may read (the system) and the few it may write (devices, the
/// per-user temp and cache folders).
const FILES: &str = r#"(allow file-read-metadata)
(allow file-read* (literal "/"))
(allow file-read* (subpath "/usr"))
(allow file-read* (subpath "/bin"))
(allow file-read* (subpath "/sbin"))
(allow file-read* (subpath "/System"))
(allow file-read* (subpath "/Library"))
(allow file-read* (subpath "/private/etc"))
(allow file-read* (subpath "/private/var/db"))
(allow file-read* (subpath "/private/var/select"))
(allow file-read* (subpath "/opt/homebrew"))
(allow file-read* (literal "/dev/random") (literal "/dev/urandom") (literal "/dev/autofs_nowait"))
(allow file-read* file-write-data
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/dtracehelper")
  (literal "/dev/ptmx")
  (regex #"^/dev/ttys[0-9]+$"))
(allow file-read-data file-write-data (subpath "/dev/fd"))
; The per-user temp and cache folders ($TMPDIR, DARWIN_USER_CACHE_DIR).
(allow file-read* file-write* (subpath "/private/var/folders"))
"#;

/// The Unix sockets every session may connect to; IP is allowed whole.
const NETWORK: &str = r#"; Unix sockets by path only (DNS, the system log, the session's temp folder): any other
; reaches a daemon outside the sandbox, such as Docker's, which starts a container that reads the token.
(allow network-outbound (remote ip "*:*"))
(allow network-outbound (remote unix-socket (path-literal "/private/var/run/mDNSResponder")))
(allow network-outbound (remote unix-socket (path-literal "/private/var/run/syslog")))
"#;

/// What a read-write grant allows: `file-link` and `file-clone` are operations of their own,
/// outside `file-write*` (git's object store links, `cp -c` clones).
const READ_WRITE: &str = "file-read* file-write* file-link file-clone";

/// What is denied on a masked token folder or file.
const TOKEN_DENY: &str = "file-read* file-write* file-clone file-link";

/// What is denied on each folder above a masked path.
const ANCESTOR_DENY: &str = "file-write-unlink file-clone file-link";

impl Resolved {
    /// The profile as SBPL text for `sandbox-exec -f`.
    ///
    /// `(version 1)`, `(deny default)`, then every allow, then every deny (the last matching
    /// rule wins): processes, Mach services and sysctls by name; the system read-only; the
    /// grants shallow first (read-only ones and the command's folder as `file-read*`,
    /// read-write ones with `file-link` and `file-clone` too, except the read-only grants
    /// inside them, which stay read-only as under bwrap); the session's temp folder
    /// read-write; IP networking and Unix sockets by path. Then the denies: `(deny file-read*
    /// file-write* file-clone file-link (subpath DIR))` when the token's folder holds nothing
    /// but the token, else `(literal FILE)`, and `(deny file-write-unlink file-clone
    /// file-link (literal A))` on every folder `A` above the masked path, so it can be neither
    /// moved out from under the rule nor cloned with the token inside. Paths are canonical, in
    /// their on-disk spelling, quoted with `\` and `"` escaped; [`super::Profile::resolve`]
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
        s.push_str(PROCESSES);
        s.push_str(FILES);
        self.sbpl_grants(&mut s);
        s.push_str(NETWORK);
        if let Some(t) = &self.tmp {
            let t = quote(t);
            let _ = writeln!(s, "(allow {READ_WRITE} (subpath {t}))");
            let _ = writeln!(
                s,
                "(allow network-bind network-inbound (local unix-socket (subpath {t})))"
            );
            let _ = writeln!(
                s,
                "(allow network-outbound (remote unix-socket (subpath {t})))"
            );
        }
        self.sbpl_denies(&mut s);
        s
    }

    /// The grants as allows, shallow first. A read-only grant inside a read-write one is left
    /// out of the latter with `require-not`, so no deny has to come before an allow.
    fn sbpl_grants(&self, s: &mut String) {
        for b in &self.binds {
            let q = quote(&b.path);
            if !b.rw {
                let _ = writeln!(s, "(allow file-read* (subpath {q}))");
                continue;
            }
            let inner: Vec<&Bind> = self
                .binds
                .iter()
                .filter(|o| !o.rw && o.path != b.path && o.path.starts_with(&b.path))
                .collect();
            if inner.is_empty() {
                let _ = writeln!(s, "(allow {READ_WRITE} (subpath {q}))");
                continue;
            }
            // The read-only grants inside stay read-only, as under bwrap.
            let _ = write!(s, "(allow {READ_WRITE} (require-all (subpath {q})");
            for o in inner {
                let _ = write!(s, " (require-not (subpath {}))", quote(&o.path));
            }
            s.push_str("))\n");
        }
    }

    /// The denies, after every allow.
    fn sbpl_denies(&self, s: &mut String) {
        if !self.denies.is_empty() {
            s.push_str(
                "; Masked (the token, the host's own folders): no read, write, clone or hard link \
                 (a clone or a link into a writable\n; grant is a readable copy), and no rename, \
                 clone or link of a folder above.\n",
            );
        }
        for d in &self.denies {
            let masked = d.mask.path();
            let _ = writeln!(s, "(deny {TOKEN_DENY} {})", self.mask_filter(&d.mask));
            for a in top_down_ancestors(masked) {
                let _ = writeln!(s, "(deny {ANCESTOR_DENY} (literal {}))", quote(a));
            }
        }
        for p in &self.protects {
            let _ = writeln!(s, "(deny file-write* (subpath {}))", quote(&p.path));
            for a in top_down_ancestors(&p.path) {
                let _ = writeln!(s, "(deny file-write-unlink (literal {}))", quote(a));
            }
        }
    }

    /// The filter of a mask: `(subpath DIR)` or `(literal FILE)`. A host folder masked whole
    /// (the state folder) may hold the session's own temp folder, which stays the session's, as
    /// under bwrap where it is bound at `/tmp`: `(require-all (subpath DIR) (require-not
    /// (subpath TMP)))`.
    fn mask_filter(&self, mask: &Mask) -> String {
        match mask {
            Mask::Folder(dir) => match self.tmp.as_deref() {
                Some(t) if t.starts_with(dir) && t != dir.as_path() => format!(
                    "(require-all (subpath {}) (require-not (subpath {})))",
                    quote(dir),
                    quote(t)
                ),
                _ => format!("(subpath {})", quote(dir)),
            },
            Mask::File { path, .. } => format!("(literal {})", quote(path)),
        }
    }

    /// A resolved profile made from paths taken as they are, without looking at the file
    /// system, so SBPL renders the same on every machine (the golden files). `grants` are
    /// `(path, read_write)` in render order (shallow first, as [`super::Profile::resolve`]
    /// sorts them); `masked` are `(path, whole_folder)`; `protect` are paths a grant shows.
    /// For SBPL only: it has no bind identities, so it is not for `bwrap`.
    ///
    /// ```
    /// use std::path::PathBuf;
    /// use relay_token::sandbox::Resolved;
    /// let r = Resolved::unchecked_for_sbpl(
    ///     &[(PathBuf::from("/Users/op"), true)],
    ///     None,
    ///     &[(PathBuf::from("/Users/op/.config/claude-ltt"), true)],
    ///     &[],
    /// );
    /// assert!(r.sbpl().contains(r#"(subpath "/Users/op/.config/claude-ltt"))"#));
    /// ```
    pub fn unchecked_for_sbpl(
        grants: &[(PathBuf, bool)],
        tmp: Option<PathBuf>,
        masked: &[(PathBuf, bool)],
        protect: &[PathBuf],
    ) -> Resolved {
        let binds: Vec<Bind> = grants
            .iter()
            .map(|(path, rw)| Bind {
                path: path.clone(),
                rw: *rw,
            })
            .collect();
        let denies = masked
            .iter()
            .map(|(path, folder)| Deny {
                given: path.clone(),
                real: path.clone(),
                mask: if *folder {
                    Mask::Folder(path.clone())
                } else {
                    Mask::File {
                        path: path.clone(),
                        empty: PathBuf::new(),
                    }
                },
                guards: guards_between(&binds, path),
            })
            .collect();
        let protects = protect
            .iter()
            .map(|path| Protect {
                path: path.clone(),
                guards: guards_between(&binds, path),
            })
            .collect();
        Resolved {
            baseline: Vec::new(),
            binds,
            tmp,
            project: None,
            denies,
            protects,
            idents: Vec::new(),
            fd_base: None,
            net: Default::default(),
            placed: Vec::new(),
            empty: Vec::new(),
        }
    }
}

/// The folders above `p`, from `/` down.
fn top_down_ancestors(p: &Path) -> Vec<&Path> {
    let mut ancestors: Vec<&Path> = p.ancestors().skip(1).collect();
    ancestors.reverse();
    ancestors
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

    #[test]
    fn ancestors_run_from_the_root_down() {
        let want: Vec<&Path> = vec![Path::new("/"), Path::new("/a"), Path::new("/a/b")];
        assert_eq!(top_down_ancestors(Path::new("/a/b/c")), want);
    }
}
