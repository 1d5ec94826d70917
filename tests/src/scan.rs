//! Secret scans from the host, as root, that report only counts and names, never the bytes
//! they look for or find:
//!
//! - [`sandbox_pids`]: the processes of a session, every descendant of a `relay-host` that
//!   lives in a pid namespace other than the host's (the sandbox's);
//! - [`scan_memory`]: how often each needle occurs in the readable memory of each process
//!   (`/proc/PID/maps`, `/proc/PID/mem`), read in chunks that overlap by a needle's length;
//! - [`token_hashes_in_memory`]: the SHA-256 of every token-shaped string (a prefix and a run
//!   of a token alphabet) in that memory, so a test can tell a stand-in from the real token
//!   without holding either;
//! - [`scan_files`]: which files under some folders hold a needle.
//!
//! Each needle is looked for as bytes and as UTF-16LE (a JavaScript engine may keep a string
//! as either).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memchr::memmem;

/// The size of one read of `/proc/PID/mem`.
const CHUNK: usize = 8 * 1024 * 1024;

/// The pid namespace of `pid` (the target of `/proc/PID/ns/pid`), if it can be read.
///
/// ```
/// assert!(relay_tests::scan::pid_namespace(std::process::id()).is_some());
/// ```
pub fn pid_namespace(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

/// The processes of the sandbox under `host`: its descendants whose pid namespace differs from
/// its own, sorted.
///
/// ```
/// // This test's own children share its namespace: none are listed.
/// let child = std::process::Command::new("sleep").arg("5").spawn()?;
/// assert!(relay_tests::scan::sandbox_pids(std::process::id()).is_empty());
/// # let mut child = child; child.kill()?; child.wait()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn sandbox_pids(host: u32) -> Vec<u32> {
    let own = pid_namespace(host);
    let mut out: Vec<u32> = crate::fixture::descendants(host as i32)
        .into_iter()
        .map(|p| p as u32)
        .filter(|&p| {
            let ns = pid_namespace(p);
            ns.is_some() && ns != own
        })
        .collect();
    out.sort_unstable();
    out
}

/// The name of `pid` (`/proc/PID/comm`), for a report.
///
/// ```
/// assert!(!relay_tests::scan::comm(std::process::id()).is_empty());
/// ```
pub fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// `needle` as UTF-16LE (each byte then a zero; meant for ASCII needles).
fn utf16le(needle: &[u8]) -> Vec<u8> {
    needle.iter().flat_map(|&b| [b, 0]).collect()
}

/// What [`scan_memory`] saw.
#[derive(Debug, Default, Clone)]
pub struct MemoryScan {
    /// Per process: its pid, name, the bytes read, and per needle how often it occurred (as
    /// bytes or UTF-16LE).
    pub processes: Vec<ProcessScan>,
}

/// One process of a [`MemoryScan`].
#[derive(Debug, Default, Clone)]
pub struct ProcessScan {
    /// The pid.
    pub pid: u32,
    /// Its name (`/proc/PID/comm`).
    pub comm: String,
    /// The bytes of its memory read.
    pub bytes: u64,
    /// Per needle (in the order given), how often it occurred.
    pub counts: Vec<usize>,
    /// True when its maps or memory could not be opened (it may have ended).
    pub unreadable: bool,
}

impl MemoryScan {
    /// How often needle `i` occurred, over all processes.
    ///
    /// ```
    /// assert_eq!(relay_tests::scan::MemoryScan::default().total(0), 0);
    /// ```
    pub fn total(&self, i: usize) -> usize {
        self.processes
            .iter()
            .map(|p| p.counts.get(i).copied().unwrap_or(0))
            .sum()
    }

    /// The bytes read, over all processes.
    ///
    /// ```
    /// assert_eq!(relay_tests::scan::MemoryScan::default().bytes(), 0);
    /// ```
    pub fn bytes(&self) -> u64 {
        self.processes.iter().map(|p| p.bytes).sum()
    }

    /// One line per process: pid, name, megabytes read and the counts (no bytes of memory).
    ///
    /// ```
    /// assert!(relay_tests::scan::MemoryScan::default().summary().is_empty());
    /// ```
    pub fn summary(&self) -> String {
        self.processes
            .iter()
            .map(|p| {
                format!(
                    "pid {} {:<16} {:>7.1} MB read{} counts {:?}\n",
                    p.pid,
                    p.comm,
                    p.bytes as f64 / 1e6,
                    if p.unreadable { " (unreadable)" } else { "" },
                    p.counts
                )
            })
            .collect()
    }
}

/// The readable mappings of `pid` as `(start, end)`, `[vvar]`, `[vsyscall]` and device memory
/// aside; `None` when its maps cannot be read.
fn readable_ranges(pid: u32) -> Option<Vec<(u64, u64)>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let name = f.nth(3).unwrap_or("");
        if !perms.starts_with('r') || name.starts_with("[vvar") || name == "[vsyscall]" {
            continue;
        }
        if name.starts_with("/dev/") && !name.starts_with("/dev/shm") {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
            out.push((a, b));
        }
    }
    Some(out)
}

/// Calls `each` with consecutive pieces of `pid`'s readable memory and how many bytes at the
/// piece's start were carried over from the piece before (its last `overlap` bytes, within the
/// same mapping); returns the bytes read, or `None` when the process's memory cannot be opened.
fn walk_memory(pid: u32, overlap: usize, each: &mut dyn FnMut(&[u8], usize)) -> Option<u64> {
    let ranges = readable_ranges(pid)?;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0u8; CHUNK + overlap];
    let mut total = 0u64;
    for (start, end) in ranges {
        let mut at = start;
        let mut kept = 0usize;
        while at < end {
            let want = ((end - at) as usize).min(CHUNK);
            let n = match mem.read_at(&mut buf[kept..kept + want], at) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            total += n as u64;
            each(&buf[..kept + n], kept);
            let piece = kept + n;
            kept = overlap.min(piece);
            buf.copy_within(piece - kept..piece, 0);
            at += n as u64;
        }
    }
    buf.iter_mut().for_each(|b| *b = 0);
    Some(total)
}

/// How often each of `needles` (not empty) occurs, as bytes or as UTF-16LE, in the readable
/// memory of each of `pids`. Reading another user's or a non-dumpable process's memory needs
/// root.
///
/// ```
/// // This process holds the marker; a `sleep` started beside it does not.
/// let marker = format!("scan-marker-{}", std::process::id());
/// let mut child = std::process::Command::new("sleep").arg("10").spawn()?;
/// let scan = relay_tests::scan::scan_memory(&[std::process::id(), child.id()], &[marker.as_bytes()]);
/// assert!(scan.processes[0].counts[0] >= 1);
/// assert_eq!(scan.processes[1].counts[0], 0);
/// assert!(scan.processes[1].bytes > 0);
/// child.kill()?;
/// child.wait()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn scan_memory(pids: &[u32], needles: &[&[u8]]) -> MemoryScan {
    assert!(needles.iter().all(|n| !n.is_empty()), "an empty needle");
    let wide: Vec<Vec<u8>> = needles.iter().map(|n| utf16le(n)).collect();
    let finders: Vec<(memmem::Finder, memmem::Finder)> = needles
        .iter()
        .zip(&wide)
        .map(|(n, w)| (memmem::Finder::new(n), memmem::Finder::new(w)))
        .collect();
    let overlap = wide.iter().map(Vec::len).max().unwrap_or(1) - 1;
    let mut out = MemoryScan::default();
    for &pid in pids {
        let mut counts = vec![0usize; needles.len()];
        // A hit wholly inside the carried-over bytes was counted with the piece before: count
        // only hits that end past them.
        let read = walk_memory(pid, overlap, &mut |piece, skip| {
            for (i, (narrow, wide)) in finders.iter().enumerate() {
                for f in [narrow, wide] {
                    let len = f.needle().len();
                    counts[i] += f.find_iter(piece).filter(|&at| at + len > skip).count();
                }
            }
        });
        out.processes.push(ProcessScan {
            pid,
            comm: comm(pid),
            bytes: read.unwrap_or(0),
            counts,
            unreadable: read.is_none(),
        });
    }
    out
}

/// The SHA-256 (hex) of every string in the readable memory of `pids` that is `prefix`
/// followed by `rest` bytes of `[A-Za-z0-9_-]` (a token's shape), and how often each occurred:
/// a test compares them with the hashes of the values it expects, never holding what it finds.
///
/// ```
/// let made = format!("zz-prefix-{}", "a1b2c3d4".repeat(4));
/// let hashes = relay_tests::scan::token_hashes_in_memory(&[std::process::id()], b"zz-prefix-", 32);
/// assert!(hashes.contains_key(&relay_tests::sha256_hex(made.as_bytes())));
/// # drop(made);
/// ```
pub fn token_hashes_in_memory(pids: &[u32], prefix: &[u8], rest: usize) -> BTreeMap<String, usize> {
    let finder = memmem::Finder::new(prefix);
    let len = prefix.len() + rest;
    let mut out: BTreeMap<String, usize> = BTreeMap::new();
    let ok = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-';
    for &pid in pids {
        walk_memory(pid, len - 1, &mut |piece, skip| {
            for at in finder.find_iter(piece) {
                let Some(cand) = piece.get(at..at + len) else {
                    continue;
                };
                if at + len <= skip || !cand[prefix.len()..].iter().all(ok) {
                    continue;
                }
                *out.entry(crate::sha256_hex(cand)).or_default() += 1;
            }
        });
    }
    out
}

/// What [`scan_files`] saw.
#[derive(Debug, Default, Clone)]
pub struct FileScan {
    /// How many regular files it read.
    pub files: usize,
    /// Per needle (in the order given), the files that hold it (as bytes or UTF-16LE).
    pub holders: Vec<BTreeSet<PathBuf>>,
}

/// Reads every regular file under each of `roots` (missing roots are skipped; symlinks are
/// not followed), leaving out those under `skip`, and lists per needle the files that hold it.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("a"), "xx needle-one xx")?;
/// std::fs::write(dir.path().join("b"), "clean")?;
/// let scan = relay_tests::scan::scan_files(&[dir.path()], &[b"needle-one", b"needle-two"], &[]);
/// assert_eq!(scan.files, 2);
/// assert_eq!(scan.holders[0].len(), 1);
/// assert!(scan.holders[1].is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn scan_files(roots: &[&Path], needles: &[&[u8]], skip: &[PathBuf]) -> FileScan {
    assert!(needles.iter().all(|n| !n.is_empty()), "an empty needle");
    let wide: Vec<Vec<u8>> = needles.iter().map(|n| utf16le(n)).collect();
    let mut out = FileScan {
        files: 0,
        holders: vec![BTreeSet::new(); needles.len()],
    };
    let mut seen = BTreeSet::new();
    for root in roots.iter().filter(|r| r.exists()) {
        for f in crate::files_under(root) {
            if skip.iter().any(|s| f.starts_with(s)) || !seen.insert(f.clone()) {
                continue;
            }
            let Ok(bytes) = std::fs::read(&f) else {
                continue;
            };
            out.files += 1;
            for (i, (n, w)) in needles.iter().zip(&wide).enumerate() {
                if memmem::find(&bytes, n).is_some() || memmem::find(&bytes, w).is_some() {
                    out.holders[i].insert(f.clone());
                }
            }
        }
    }
    out
}
