//! Times a sandboxed `/bin/true` under the generated profile beside a bare
//! `bwrap --ro-bind / / /bin/true`, interleaved in the same run.
//!
//! `cargo run --release -p relay-token --example bench_sandbox [RUNS]` (default 200 each).
//! The profile: a home granted read-write, its `.config` read-only, the token's dedicated folder
//! masked, a session temp folder as `/tmp`, the project as working folder.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use relay_token::sandbox::{find_bwrap, Profile};

fn time(argv: &[OsString]) -> Duration {
    let start = Instant::now();
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn");
    let took = start.elapsed();
    assert!(status.success(), "{argv:?} failed: {status}");
    took
}

fn stats(name: &str, v: &mut [Duration]) -> Duration {
    v.sort();
    let median = v[v.len() / 2];
    println!(
        "{name:<10} median {:>7.3} ms  min {:>7.3} ms  max {:>7.3} ms",
        median.as_secs_f64() * 1e3,
        v[0].as_secs_f64() * 1e3,
        v[v.len() - 1].as_secs_f64() * 1e3
    );
    median
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(200);
    let bwrap = find_bwrap(None)?;

    let base = Path::new("/var/tmp/relay-token-bench");
    std::fs::create_dir_all(base)?;
    let root = base.join(format!("run-{}", std::process::id()));
    let home = root.join("home");
    let token_dir = home.join(".config/acme-ltt");
    std::fs::create_dir_all(&token_dir)?;
    std::fs::write(token_dir.join("token"), "sk-ant-oat01-BENCH\n")?;
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp)?;

    let mut p = Profile::new();
    p.read_write(home.clone())
        .read(home.join(".config"))
        .deny(token_dir.join("token"))
        .project(home.clone())
        .tmp(tmp)
        .command_dir(PathBuf::from("/usr/bin"));
    let resolved = p.resolve(std::slice::from_ref(&home))?;
    let sandboxed = resolved.bwrap_argv(&bwrap, &[OsString::from("/bin/true")]);
    let bare: Vec<OsString> = [
        bwrap.as_os_str(),
        "--ro-bind".as_ref(),
        "/".as_ref(),
        "/".as_ref(),
        "/bin/true".as_ref(),
    ]
    .iter()
    .map(|s| s.to_os_string())
    .collect();

    // Warm up both, then interleave.
    for _ in 0..5 {
        time(&sandboxed);
        time(&bare);
    }
    let (mut a, mut b) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for i in 0..runs {
        if i % 2 == 0 {
            a.push(time(&sandboxed));
            b.push(time(&bare));
        } else {
            b.push(time(&bare));
            a.push(time(&sandboxed));
        }
    }
    println!("{runs} runs each, interleaved; bwrap {}", bwrap.display());
    let ma = stats("profile", &mut a);
    let mb = stats("bare", &mut b);
    println!(
        "ratio of medians: {:.3}x",
        ma.as_secs_f64() / mb.as_secs_f64()
    );
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
