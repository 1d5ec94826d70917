//! The hardening of a process that holds the token: relay-host and `relay-stand-in` call it
//! first thing.

/// Hardens this process for holding a secret: on Linux `PR_SET_DUMPABLE 0` (no core dumps, no
/// ptrace attach by the same user, `/proc/PID/mem` closed to them), on macOS `PT_DENY_ATTACH`
/// (no debugger attach); everywhere `RLIMIT_CORE 0`.
pub(crate) fn harden_process() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) takes integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    #[cfg(target_vendor = "apple")]
    // SAFETY: ptrace(PT_DENY_ATTACH) takes no pointer it dereferences.
    let rc = unsafe { libc::ptrace(libc::PT_DENY_ATTACH, 0, std::ptr::null_mut(), 0) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `zero` is a valid rlimit for the duration of the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// `harden_process`'s example.
    #[test]
    fn harden_process_doc_example() {
        crate::harden_process().unwrap();
    }
}
