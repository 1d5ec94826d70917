//! Ties a program relay-host spawns to the host's life: the shim, and a stand-in session's
//! `relay-stand-in`, get SIGTERM when the host dies, and never start once it has.

use std::io;
use std::process::Command;

#[cfg(target_os = "linux")]
use relay_token::sandbox;

/// If the host dies (killed before `started`, or at any time), the spawned program gets SIGTERM
/// (the shim forwards it to the session, `relay-stand-in` ends and wipes the real token):
/// nothing runs on unsupervised (SIGTERM is at its default action in the program, whatever the
/// host inherited). Sandboxed, the shim also installs
/// the no-tracing filter that bwrap and the session inherit (a session could otherwise stop
/// bwrap's init and hang the launch, or read the token out of Claude Code's memory).
pub(crate) fn tie_to_host(cmd: &mut Command, sandboxed: bool) {
    let host_pid = std::process::id() as libc::pid_t;
    // SAFETY: the hook runs between fork and exec and makes raw system calls only (sigprocmask,
    // sigaction on a stack value, prctl, getppid, and the filter's two prctl on static data); it
    // allocates nothing and builds its error with `from_raw_os_error` / `last_os_error`.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            // The host defers these while it prepares; the shim must get them.
            crate::launch::signals::undefer_in_child();
            // SIGTERM is the shim's parent-death signal and what the host forwards: it must not
            // stay ignored when the host's own parent left it so (`trap '' TERM`), or the shim,
            // which keeps an inherited ignored signal ignored, would let the session outlive a
            // killed host.
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            if libc::sigaction(libc::SIGTERM, &dfl, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Linux only: macOS has no parent-death signal.
            #[cfg(target_os = "linux")]
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The host may have died before the prctl: then nobody would send the signal.
            if libc::getppid() != host_pid {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // Linux only: the filter guards bwrap's init; macOS has no bwrap.
            #[cfg(target_os = "linux")]
            if sandboxed {
                sandbox::seccomp::install_no_tracing()?;
            }
            #[cfg(not(target_os = "linux"))]
            let _ = sandboxed;
            Ok(())
        });
    }
}
