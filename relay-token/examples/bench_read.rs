//! `read_claude_token` on a warm file beside `std::fs::read` of the same file, interleaved in
//! one run; and a one-call mode for counting its system calls under strace.
//!
//! ```text
//! cargo run --release -p relay-token --example bench_read            # timing, 20000 calls each
//! cargo run --release -p relay-token --example bench_read -- 50000   # another count
//! strace -f -o trace.txt target/release/examples/bench_read --one-call
//!     # the calls of one read lie between the two getppid() lines
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use relay_token::read_claude_token;

fn stats(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort_unstable();
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let dir = std::env::temp_dir().join(format!("relay-bench-read-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp folder");
    let path: PathBuf = dir.join("token");
    // A token of a realistic length (setup-token's are about 108 bytes) and its newline.
    let body: Vec<u8> = (0..108)
        .map(|i| b'A' + (i % 26) as u8)
        .chain([b'\n'])
        .collect();
    std::fs::write(&path, &body).expect("write token");

    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--one-call") {
        // SAFETY: getppid has no preconditions; it only marks the trace.
        unsafe { libc::getppid() };
        let token = read_claude_token(&path);
        // SAFETY: as above.
        unsafe { libc::getppid() };
        let ok = token.is_ok();
        drop(token);
        std::fs::remove_dir_all(&dir).ok();
        assert!(ok);
        return;
    }

    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    for _ in 0..1000 {
        read_claude_token(&path).expect("warm-up read");
        std::fs::read(&path).expect("warm-up read");
    }
    let mut ours = Vec::with_capacity(n);
    let mut std_read = Vec::with_capacity(n);
    for i in 0..2 * n {
        // Interleaved, alternating which goes first.
        let first_ours = i % 2 == 0;
        for ours_now in [first_ours, !first_ours] {
            let t = Instant::now();
            if ours_now {
                let tok = read_claude_token(&path).expect("read");
                std::hint::black_box(&tok);
                drop(tok);
                ours.push(t.elapsed());
            } else {
                let v = std::fs::read(&path).expect("read");
                std::hint::black_box(&v);
                drop(v);
                std_read.push(t.elapsed());
            }
        }
        if ours.len() >= n && std_read.len() >= n {
            break;
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    let (om, omin, omax) = stats(ours);
    let (sm, smin, smax) = stats(std_read);
    println!("{n} calls each, file of {} bytes, interleaved", body.len());
    println!("read_claude_token: median {om:?}  min {omin:?}  max {omax:?}");
    println!("std::fs::read:     median {sm:?}  min {smin:?}  max {smax:?}");
    println!(
        "ratio of medians (read_claude_token / std::fs::read): {:.2}",
        om.as_secs_f64() / sm.as_secs_f64()
    );
}
