//! Ten sessions at once per mode: the Pss of every process of each session (relay-host and all
//! its descendants: relay-shim, bwrap, Claude Code and its tools, relay-stand-in or the
//! allow-list's forwarder), summed over the ten while each holds at its fifth step. The modes
//! alternate round by round (pipe against a TLS API, as pipe mode meets api.anthropic.com, and
//! stand-in).

use std::collections::BTreeMap;

use crate::linux::{comm, rollup, Series, PIPE};
use relay_tests::stand_in::STAND_IN;

/// Which part of a session a process is, by its name.
fn part(name: &str) -> &'static str {
    match name {
        "relay-host" => "relay-host",
        "relay-shim" => "relay-shim",
        "bwrap" => "bwrap",
        "relay-stand-in" => "relay-stand-in",
        "relay-net-forwa" => "relay-net-forward",
        n if n.starts_with("claude") => "claude",
        _ => "tools (sh, sleep)",
    }
}

/// `n` held turns of `series` at once: Pss (KiB) by part, summed over every process of every
/// session, and the number of processes.
fn measure(series: &[Series]) -> (BTreeMap<&'static str, u64>, usize) {
    let mut runs: Vec<_> = series.iter().map(|s| s.start_held()).collect();
    for (s, run) in series.iter().zip(&mut runs) {
        s.wait_held(run);
    }
    let mut by_part = BTreeMap::new();
    let mut count = 0;
    for run in &runs {
        for pid in relay_tests::fixture::descendants(run.pid() as i32) {
            let pid = pid as u32;
            *by_part.entry(part(&comm(pid))).or_insert(0) += rollup(pid)[0];
            count += 1;
        }
    }
    for (s, run) in series.iter().zip(runs) {
        s.release(run);
    }
    (by_part, count)
}

/// `rounds` rounds of `n` concurrent sessions per mode; prints each round's Pss by part and the
/// totals' medians.
pub fn run(rounds: usize, n: usize) {
    if rounds == 0 {
        return;
    }
    let modes = [("pipe+TLS", PIPE), ("stand-in", STAND_IN)];
    let sets: Vec<Vec<Series>> = (modes.iter())
        .map(|(name, mode)| (0..n).map(|_| Series::new(name, mode, true)).collect())
        .collect();
    let mut totals: Vec<Vec<u64>> = vec![Vec::new(); modes.len()];
    println!("\n{n} concurrent sessions held after four steps, Pss of every process (KiB)");
    for round in 0..rounds {
        for j in 0..modes.len() {
            let i = (j + round) % modes.len();
            let (parts, count) = measure(&sets[i]);
            let total: u64 = parts.values().sum();
            totals[i].push(total);
            let each: Vec<String> = parts.iter().map(|(k, v)| format!("{k} {v}")).collect();
            println!(
                "round {round} {:<9} total {total:>8} ({count} processes): {}",
                modes[i].0,
                each.join(", ")
            );
        }
    }
    let med = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2]
    };
    let (p, s) = (med(&totals[0]), med(&totals[1]));
    println!(
        "total Pss of {n} sessions: pipe+TLS {:.1} MiB, stand-in {:.1} MiB: {:.3}x ({:+.1} MiB, \
         {:+.2} MiB a session)",
        p as f64 / 1024.0,
        s as f64 / 1024.0,
        s as f64 / p as f64,
        (s as f64 - p as f64) / 1024.0,
        (s as f64 - p as f64) / 1024.0 / n as f64
    );
}
