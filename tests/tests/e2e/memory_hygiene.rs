//! Memory hygiene: while a sandboxed session runs, the token's bytes are
//! nowhere in the readable memory of `relay-host` or `relay-shim`; `relay-host` is not dumpable
//! and may not write a core file.
//!
//! Runs as root (the scan reads `/proc/<pid>/mem` of a non-dumpable process, which needs
//! `CAP_SYS_PTRACE`). Build the binaries first: `cargo build --workspace --bins`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use relay_tests::fixture::wait_child;
use relay_tests::world::World;
use relay_tests::{fake_agent, sha256_hex, wait_for_records};

const TIMEOUT: Duration = Duration::from_secs(30);

/// Where `needle` occurs in the readable mappings of `pid`: one line per hit, naming the
/// mapping. Mappings that cannot be read (`[vvar]`, `[vsyscall]`, device memory) are skipped.
fn find_in_memory(pid: u32, needle: &[u8]) -> Vec<String> {
    let regions = relay_tests::process_memory(pid);
    let scanned: usize = regions.iter().map(|(_, bytes)| bytes.len()).sum();
    assert!(scanned > 0, "nothing readable in /proc/{pid}/mem");
    let mut hits = Vec::new();
    for (line, bytes) in &regions {
        for (i, _) in bytes
            .windows(needle.len())
            .enumerate()
            .filter(|(_, w)| *w == needle)
        {
            hits.push(format!("{line} at +{i:#x}"));
        }
    }
    hits
}

/// These tests read another process's `/proc/<pid>/mem` (a non-dumpable one) and drop to
/// `nobody`: they need root.
fn needs_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root (it reads /proc/<pid>/mem of a non-dumpable process)"
    );
}

/// SIGTERM to the host (forwarded to the session) and a wait, also when a test fails.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: kill with a pid this test spawned and has not reaped.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// A sandboxed launch whose fake agent has read its token and sleeps; returns the host, the
/// shim's pid and the token.
fn sleeping_session(fx: &World) -> (Running, u32, String) {
    needs_root();
    let token = fx.fresh_token();
    fx.set_agent_args(&["--sleep", "60"]);
    let req = fx.request("hygiene", true, "hygiene", &[]);
    let host = Running(fx.launch_cmd(&req).spawn().expect("spawn relay-host"));
    let recs = wait_for_records(&fx.record, 1, TIMEOUT);
    assert_eq!(
        recs[0]["token_sha256"],
        sha256_hex(token.as_bytes()),
        "the session got its token: {}",
        recs[0]
    );
    let shim = wait_child(host.0.id() as i32, TIMEOUT).expect("relay-shim under relay-host");
    let comm = std::fs::read_to_string(format!("/proc/{shim}/comm")).unwrap();
    assert_eq!(comm.trim(), "relay-shim");
    (host, shim as u32, token)
}

#[test]
fn the_scanner_finds_a_token_it_is_shown() {
    // The positive control: this process holds the token in a String.
    let token = relay_tests::fake_token();
    let held = std::hint::black_box(token.clone());
    assert!(!find_in_memory(std::process::id(), held.as_bytes()).is_empty());
}

#[test]
fn no_copy_of_the_token_in_host_or_shim_memory() {
    let fx = World::agent(&fake_agent());
    let (host, shim, token) = sleeping_session(&fx);
    let in_host = find_in_memory(host.0.id(), token.as_bytes());
    let in_shim = find_in_memory(shim, token.as_bytes());
    assert!(
        in_host.is_empty(),
        "relay-host holds the token: {in_host:#?}"
    );
    assert!(
        in_shim.is_empty(),
        "relay-shim holds the token: {in_shim:#?}"
    );
    drop(host);
}

/// The launch secret of a kind `claude` launch is handled like the token: while the session
/// runs, no copy of it is in the memory of `relay-host` or `relay-shim`. (A wrapper beside a
/// copy of the host keeps the secret it is handed, so the test knows what to look for, and runs
/// the real shim with it on fd 3.)
#[test]
fn no_copy_of_the_launch_secret_in_host_or_shim_memory() {
    let mut fx = World::agent(&fake_agent());
    let lone = fx.root.join("lone");
    std::fs::create_dir(&lone).unwrap();
    let host = lone.join("relay-host");
    relay_tests::copy_program(&relay_tests::relay_host(), &host);
    let kept = lone.join("secret");
    let wrapper = lone.join("relay-shim");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncat <&3 >'{k}'\nexec 3<'{k}'\nexec '{}' \"$@\"\n",
            relay_tests::relay_shim().display(),
            k = kept.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    fx.host = host;
    let (host, shim, _token) = sleeping_session(&fx);
    let secret = std::fs::read(&kept).unwrap();
    assert_eq!(secret.len(), 64, "the wrapper kept the secret");
    let in_host = find_in_memory(host.0.id(), &secret);
    let in_shim = find_in_memory(shim, &secret);
    assert!(
        in_host.is_empty(),
        "relay-host holds the secret: {in_host:#?}"
    );
    assert!(
        in_shim.is_empty(),
        "relay-shim holds the secret: {in_shim:#?}"
    );
    drop(host);
}

#[test]
fn the_host_may_not_write_a_core_file() {
    let fx = World::agent(&fake_agent());
    let (host, _shim, _token) = sleeping_session(&fx);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", host.0.id())).unwrap();
    let core = limits
        .lines()
        .find(|l| l.starts_with("Max core file size"))
        .expect("a core limit line");
    let f: Vec<&str> = core.split_whitespace().collect();
    // `Max core file size  <soft> <hard> bytes`
    assert_eq!((f[4], f[5]), ("0", "0"), "relay-host's core limit: {core}");
}

/// A process that is not dumpable has the files in its `/proc/<pid>` owned by root (the kernel's
/// `task_dump_owner`; the folder itself keeps the process's uid on Linux 6.x), whatever its uid.
/// As root that shows nothing, so this launch runs as `nobody` (unsandboxed: no user namespace
/// needed; no token either): the host's `/proc/<pid>/status` must be root's, the shim's
/// (dumpable again after its exec) `nobody`'s, as a control.
#[test]
fn the_host_is_not_dumpable() {
    const NOBODY: u32 = 65534;
    needs_root();
    // `nobody` runs the binaries: copies in a folder it may read, since a checkout in a home
    // folder (`/root` is 0700) is closed to it.
    let bins = tempfile::Builder::new()
        .prefix("relay-bins-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(bins.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = |from: PathBuf| {
        let to = bins.path().join(from.file_name().unwrap());
        relay_tests::copy_program(&from, &to);
        to
    };
    let agent = copy(fake_agent());
    let host = copy(relay_tests::relay_host());
    copy(relay_tests::relay_shim());
    let mut fx = World::agent(&agent);
    fx.host = host;
    for d in [&fx.state, &fx.project] {
        std::fs::create_dir_all(d).unwrap();
        std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let req = fx.request("nobody", false, "nobody", &["--sleep", "60"]);
    std::os::unix::fs::chown(&req, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut cmd = fx.launch_cmd(&req);
    // SAFETY: setgroups/setgid/setuid between fork and exec are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let host = Running(cmd.spawn().expect("spawn relay-host as nobody"));
    wait_for_records(&fx.record, 1, TIMEOUT);
    let shim = wait_child(host.0.id() as i32, TIMEOUT).expect("relay-shim under relay-host");
    let owner = |pid: u32| {
        let m = std::fs::metadata(Path::new(&format!("/proc/{pid}/status"))).unwrap();
        (m.uid(), m.gid())
    };
    let status = std::fs::read_to_string(format!("/proc/{}/status", host.0.id())).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.contains(&NOBODY.to_string())),
        "relay-host runs as nobody: {status}"
    );
    assert_eq!(
        owner(shim as u32),
        (NOBODY, NOBODY),
        "control: a dumpable process"
    );
    assert_eq!(owner(host.0.id()), (0, 0), "relay-host is dumpable");
}
