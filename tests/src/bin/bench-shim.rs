//! `bench-shim [N]`: what `relay-shim` costs.
//!
//! - VmRSS (and VmHWM) of `relay-shim` while its target sleeps, from `/proc/<pid>/status`;
//! - wall time of `relay-shim --pass-token -- /bin/true` (token pipe at 5, status pipe at 3,
//!   spawned with the library's placement, as `relay-host` does) beside a direct `/bin/true`
//!   (same placement, no token), interleaved, N runs each (default 500): min, median, max, and
//!   the added latency (difference of the medians). A third series, `/bin/sh -c '/bin/true;
//!   exit $?'` (dash forks, execs and waits), shows what the cheapest wrapper written in C adds
//!   on the same machine at the same moment.
//!
//! `RELAY_SHIM=PATH` benchmarks another build of the shim. Use the release build for figures:
//! `cargo build --release --workspace --bins && target/release/bench-shim`.

use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use relay_token::{ClaudeToken, FdMap, TokenPipe};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    // RELAY_SHIM=path measures another build (a static one, say) with the same harness.
    let shim = std::env::var_os("RELAY_SHIM")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(relay_tests::relay_shim);
    println!("relay-shim: {}", shim.display());

    // Memory: a shim whose target sleeps.
    let mut child = Command::new(&shim)
        .args(["--", "/bin/sleep", "2"])
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn relay-shim");
    std::thread::sleep(Duration::from_millis(300));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    for line in status.lines() {
        if line.starts_with("VmRSS")
            || line.starts_with("VmHWM")
            || line.starts_with("RssAnon")
            || line.starts_with("RssFile")
        {
            println!("relay-shim {line}");
        }
    }
    child.kill().ok();
    child.wait().ok();

    // Latency, interleaved.
    let token = ClaudeToken::from_bytes(relay_tests::fake_token().as_bytes()).unwrap();
    let mut direct = Vec::with_capacity(n);
    let mut shimmed = Vec::with_capacity(n);
    let mut hop = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let st = FdMap::new()
            .spawn(&mut Command::new("/bin/true"))
            .unwrap()
            .wait()
            .unwrap();
        direct.push(t.elapsed());
        assert!(st.success());

        let pipe = TokenPipe::new(&token).unwrap();
        let (r, w) = pipe_cloexec().unwrap();
        let mut extra = FdMap::new();
        extra.place(w.as_fd(), 3).unwrap();
        let t = Instant::now();
        let st = pipe
            .spawn_with(
                Command::new(&shim).args(["--pass-token", "--", "/bin/true"]),
                extra,
            )
            .unwrap()
            .wait()
            .unwrap();
        shimmed.push(t.elapsed());
        assert!(st.success());
        drop((r, w));

        // Reference: the cheapest wrapper a C program gives, dash forking and waiting.
        let t = Instant::now();
        let st = FdMap::new()
            .spawn(Command::new("/bin/sh").args(["-c", "/bin/true; exit $?"]))
            .unwrap()
            .wait()
            .unwrap();
        hop.push(t.elapsed());
        assert!(st.success());
    }
    let d = stats(&mut direct);
    let s = stats(&mut shimmed);
    let h = stats(&mut hop);
    println!("N={n}            min      median   max");
    println!(
        "direct /bin/true  {:>8.3} {:>8.3} {:>8.3} ms",
        d.0, d.1, d.2
    );
    println!(
        "relay-shim        {:>8.3} {:>8.3} {:>8.3} ms",
        s.0, s.1, s.2
    );
    println!(
        "sh -c 'true; exit' {:>8.3} {:>8.3} {:>8.3} ms  (reference: a wrapper in C)",
        h.0, h.1, h.2
    );
    println!("added latency (median - median): {:.3} ms", s.1 - d.1);
    println!("added by the sh reference:       {:.3} ms", h.1 - d.1);
}

/// (min, median, max) in milliseconds.
fn stats(v: &mut [Duration]) -> (f64, f64, f64) {
    v.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(v[0]), ms(v[v.len() / 2]), ms(v[v.len() - 1]))
}

/// A close-on-exec pipe as `(read end, write end)`.
fn pipe_cloexec() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    std::io::pipe().map(|(r, w)| (r.into(), w.into()))
}
