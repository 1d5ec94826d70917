//! Why user namespaces (which bwrap needs) cannot be made here, by cause, each with its fix.

use std::path::Path;

/// What keeps this process from making a user namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Cause {
    /// `user.max_user_namespaces` is 0.
    MaxZero,
    /// Debian's `kernel.unprivileged_userns_clone` is 0 (and the caller is not root).
    DebianClone,
    /// AppArmor restricts unprivileged user namespaces
    /// (`kernel.apparmor_restrict_unprivileged_userns` is 1; Ubuntu 23.10 and later).
    AppArmor,
    /// A container whose seccomp profile or missing capability refuses `unshare`.
    Container,
    /// None of the above was found.
    Unknown,
}

impl Cause {
    /// The cause in words.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Cause::MaxZero => "user.max_user_namespaces is 0",
            Cause::DebianClone => "kernel.unprivileged_userns_clone is 0 (Debian's switch)",
            Cause::AppArmor => {
                "AppArmor restricts unprivileged user namespaces \
                 (kernel.apparmor_restrict_unprivileged_userns is 1)"
            }
            Cause::Container => "this runs in a container that refuses user namespaces",
            Cause::Unknown => "user namespaces cannot be made, for a reason not found here",
        }
    }

    /// What to do about it.
    pub(crate) fn fix(self) -> &'static str {
        match self {
            Cause::MaxZero => {
                "user.max_user_namespaces is 0: `sysctl -w user.max_user_namespaces=15000` (and \
                 the same line in /etc/sysctl.d/ to keep it)"
            }
            Cause::DebianClone => {
                "Debian's switch is off: `sysctl -w kernel.unprivileged_userns_clone=1` (and the \
                 same line in /etc/sysctl.d/ to keep it)"
            }
            Cause::AppArmor => {
                "AppArmor blocks unprivileged user namespaces (Ubuntu 23.10 and later): give bwrap \
                 an AppArmor profile that allows `userns,` (/etc/apparmor.d/bwrap), or \
                 `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`"
            }
            Cause::Container => {
                "the container refuses user namespaces: run it with user namespaces allowed \
                 (Docker: `--security-opt seccomp=unconfined --security-opt apparmor=unconfined`, \
                 or `--privileged`), or run relay-host outside it"
            }
            Cause::Unknown => {
                "check that `unshare --user true` works for this user and that \
                 `bwrap --ro-bind / / true` runs"
            }
        }
    }
}

fn sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The cause found from the kernel's settings (under `/proc/sys`), else a container, else
/// [`Cause::Unknown`]. Meant for after bwrap failed: it does not itself try a namespace.
pub(crate) fn cause() -> Cause {
    match cause_by_settings() {
        Some(c) => c,
        None if in_container() => Cause::Container,
        None => Cause::Unknown,
    }
}

/// The cause the kernel's settings show, if any.
fn cause_by_settings() -> Option<Cause> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let is = |path: &str, value: &str| sysctl(path).as_deref() == Some(value);
    if is("/proc/sys/user/max_user_namespaces", "0") {
        return Some(Cause::MaxZero);
    }
    if !root && is("/proc/sys/kernel/unprivileged_userns_clone", "0") {
        return Some(Cause::DebianClone);
    }
    if !root
        && is(
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
        )
    {
        return Some(Cause::AppArmor);
    }
    None
}

/// True when the kernel's settings alone say this process cannot make a user namespace
/// ([`Cause::MaxZero`], [`Cause::DebianClone`], [`Cause::AppArmor`]): a few small reads, no
/// namespace tried.
#[cfg(target_os = "linux")]
pub(crate) fn blocked_by_settings() -> bool {
    cause_by_settings().is_some()
}

/// True when this looks like a container: Docker's or Podman's mark, or a cgroup line naming
/// one.
fn in_container() -> bool {
    Path::new("/.dockerenv").exists()
        || Path::new("/run/.containerenv").exists()
        || sysctl("/proc/1/cgroup").is_some_and(|c| {
            ["docker", "kubepods", "lxc", "containerd"]
                .iter()
                .any(|k| c.contains(k))
        })
}

#[cfg(test)]
mod tests {
    /// `Cause`'s example.
    #[test]
    fn cause_doc_example() {
        use crate::userns::Cause;
        assert!(Cause::MaxZero.fix().contains("user.max_user_namespaces"));
    }

    /// `words`'s example.
    #[test]
    fn words_doc_example() {
        assert!(crate::userns::Cause::AppArmor.words().contains("AppArmor"));
    }

    /// `fix`'s example.
    #[test]
    fn fix_doc_example() {
        assert!(crate::userns::Cause::DebianClone
            .fix()
            .contains("unprivileged_userns_clone=1"));
    }
}
