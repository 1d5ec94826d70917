//! A stand-in session's running `relay-stand-in`, as the launch holds it until the session
//! ends ([`crate::launch::network::stand_in`] starts it).

/// A stand-in session's `relay-stand-in`, running. Dropping it ends it (SIGTERM, then waits:
/// its proxy stops and the real token is wiped) and waits for the last of its reports.
pub(crate) struct StandInProxy {
    child: std::process::Child,
    reports: Option<std::thread::JoinHandle<()>>,
}

impl StandInProxy {
    /// The running program `child`, and the thread that writes its reports.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn new(
        child: std::process::Child,
        reports: std::thread::JoinHandle<()>,
    ) -> StandInProxy {
        let reports = Some(reports);
        StandInProxy { child, reports }
    }
}

impl Drop for StandInProxy {
    fn drop(&mut self) {
        // SAFETY: kill on our own child, not yet reaped (so its pid is still its own).
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
        if let Some(t) = self.reports.take() {
            let _ = t.join();
        }
    }
}
