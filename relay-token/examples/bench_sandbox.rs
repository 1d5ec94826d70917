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

    // For the breakdown: the namespace flags alone over the whole root, and the profile
    // without its `--dev /dev` (bwrap binds six device nodes and mounts devpts for it).
    let flags_only: Vec<OsString> = sandboxed
        .iter()
        .take_while(|a| *a != "--ro-bind" && *a != "--symlink")
        .cloned()
        .chain(bare[1..].iter().cloned())
        .collect();
    let no_dev: Vec<OsString> = {
        let mut v = Vec::new();
        let mut it = sandboxed.iter();
        while let Some(a) = it.next() {
            if a == "--dev" {
                it.next();
            } else {
                v.push(a.clone());
            }
        }
        v
    };

    let variants: [(&str, &Vec<OsString>); 4] = [
        ("profile", &sandboxed),
        ("bare", &bare),
        ("flags-only", &flags_only),
        ("no-dev", &no_dev),
    ];
    for _ in 0..5 {
        for (_, argv) in &variants {
            time(argv);
        }
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); variants.len()];
    for i in 0..runs {
        // Rotate the order each round so no variant always runs first.
        for k in 0..variants.len() {
            let j = (i + k) % variants.len();
            times[j].push(time(variants[j].1));
        }
    }
    println!("{runs} runs each, interleaved; bwrap {}", bwrap.display());
    let medians: Vec<Duration> = variants
        .iter()
        .zip(times.iter_mut())
        .map(|((name, _), t)| stats(name, t))
        .collect();
    let ratio = |i: usize| medians[i].as_secs_f64() / medians[1].as_secs_f64();
    println!("ratio of medians, profile / bare: {:.3}x", ratio(0));
    println!(
        "breakdown: namespace flags over --ro-bind / / {:.3}x; profile without --dev {:.3}x",
        ratio(2),
        ratio(3)
    );
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
