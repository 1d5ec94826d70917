//! Secret scans from the host, as root, that report only counts and names, never the bytes they
//! look for or find:
//!
//! - [`sandbox_pids`](crate::scan::sandbox_pids): the processes of a session, every descendant of a
//!   `relay-host` that lives in a pid namespace other than the host's (the sandbox's);
//! - [`scan_memory`](crate::scan::scan_memory): how often each needle occurs in the readable memory
//!   of each process (`/proc/PID/maps`, `/proc/PID/mem`; only the pages `/proc/PID/pagemap` shows
//!   present or swapped), read in chunks that overlap by a needle's length;
//! - [`scan_memory_and_shapes`](crate::scan::scan_memory_and_shapes): also the SHA-256 of every
//!   token-shaped string (a prefix and a run of a token alphabet) in that memory, so a test can
//!   tell a stand-in from the real token without holding either;
//! - [`scan_files`](crate::scan::scan_files): which files under some folders hold a needle.
//!
//! Each needle is looked for as bytes and as UTF-16LE (a JavaScript engine may keep a string as
//! either).

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
    /// The hashes of the token-shaped strings found, with their counts
    /// ([`scan_memory_and_shapes`]).
    pub shaped: BTreeMap<String, usize>,
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
    let maps = readable_mappings(pid)?;
    let device = |name: &str| name.starts_with("/dev/") && !name.starts_with("/dev/shm");
    Some(
        maps.into_iter()
            .filter(|m| !device(&m.name))
            .map(|m| (m.start, m.end))
            .collect(),
    )
}

/// One readable mapping of a process: its `/proc/PID/maps` line, its range and its name.
pub(crate) struct Mapping {
    /// The whole maps line.
    pub line: String,
    /// The first address.
    pub start: u64,
    /// The address past the end.
    pub end: u64,
    /// The mapped file or `[heap]`-like name (empty for an anonymous mapping).
    pub name: String,
}

/// The readable mappings of `pid`, `[vvar]` and `[vsyscall]` aside (they cannot be read
/// through `/proc/PID/mem`); `None` when its maps cannot be read.
pub(crate) fn readable_mappings(pid: u32) -> Option<Vec<Mapping>> {
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
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        if let (Ok(start), Ok(end)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
            let (line, name) = (line.to_owned(), name.to_owned());
            out.push(Mapping {
                line,
                start,
                end,
                name,
            });
        }
    }
    Some(out)
}

/// The runs of pages of `[start, end)` that hold data (present in memory or swapped out, by
/// `/proc/PID/pagemap`): a page never touched reads as zeros and cannot hold a secret. When the
/// page map cannot be read, the whole range.
fn populated(pagemap: Option<&std::fs::File>, start: u64, end: u64) -> Vec<(u64, u64)> {
    const PAGE: u64 = 4096;
    let Some(map) = pagemap else {
        return vec![(start, end)];
    };
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut entries = vec![0u8; 8 * 4096];
    let mut page = start / PAGE;
    while page < end / PAGE {
        let n = ((end / PAGE - page) as usize).min(4096);
        let buf = &mut entries[..n * 8];
        if map.read_exact_at(buf, page * 8).is_err() {
            return vec![(start, end)];
        }
        for (i, e) in buf.chunks_exact(8).enumerate() {
            let bits = u64::from_le_bytes(e.try_into().unwrap());
            if bits & (3 << 62) == 0 {
                continue;
            }
            let a = (page + i as u64) * PAGE;
            match out.last_mut() {
                Some(last) if last.1 == a => last.1 = a + PAGE,
                _ => out.push((a, a + PAGE)),
            }
        }
        page += n as u64;
    }
    out
}

/// Calls `each` with consecutive pieces of `pid`'s readable, populated memory ([`populated`])
/// and how many bytes at the piece's start were carried over from the piece before (its last
/// `overlap` bytes, within one run of pages); returns the bytes read, or `None` when the
/// process's memory cannot be opened.
fn walk_memory(pid: u32, overlap: usize, each: &mut dyn FnMut(&[u8], usize)) -> Option<u64> {
    let ranges = readable_ranges(pid)?;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap")).ok();
    let mut buf = vec![0u8; CHUNK + overlap];
    let mut total = 0u64;
    for (start, end) in ranges
        .into_iter()
        .flat_map(|(a, b)| populated(pagemap.as_ref(), a, b))
    {
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
    scan_memory_and_shapes(pids, needles, None)
}

/// [`scan_memory`], and in the same pass, when `shape` is `(prefix, rest)`, the SHA-256 (hex)
/// of every string that is `prefix` followed by `rest` bytes of `[A-Za-z0-9_-]` (a token's
/// shape; as bytes, or UTF-16LE hashed as the bytes it encodes), with how often each occurred
/// ([`MemoryScan::shaped`]): a test compares them with the hashes of the values it expects,
/// never holding what it finds.
///
/// ```
/// let made = format!("zz-prefix-{}", "a1b2c3d4".repeat(4));
/// let scan = relay_tests::scan::scan_memory_and_shapes(&[std::process::id()], &[b"zz"], Some((b"zz-prefix-", 32)));
/// assert!(scan.shaped.contains_key(&relay_tests::sha256_hex(made.as_bytes())));
/// # drop(made);
/// ```
pub fn scan_memory_and_shapes(
    pids: &[u32],
    needles: &[&[u8]],
    shape: Option<(&[u8], usize)>,
) -> MemoryScan {
    assert!(needles.iter().all(|n| !n.is_empty()), "an empty needle");
    let mut finders: Vec<memmem::Finder> = Vec::new();
    for n in needles {
        finders.push(memmem::Finder::new(n).into_owned());
        finders.push(memmem::Finder::new(&utf16le(n)).into_owned());
    }
    let shapes = shape.map(|(prefix, rest)| Shapes::new(prefix, rest));
    let mut overlap = finders.iter().map(|f| f.needle().len()).max().unwrap_or(1) - 1;
    if let Some(sh) = &shapes {
        overlap = overlap.max(sh.overlap());
    }
    let mut out = MemoryScan::default();
    for &pid in pids {
        let name = comm(pid);
        let mut counts = vec![0usize; needles.len()];
        // A hit wholly inside the carried-over bytes was counted with the piece before: count
        // only hits that end past them.
        let read = walk_memory(pid, overlap, &mut |piece, skip| {
            for (i, f) in finders.iter().enumerate() {
                let len = f.needle().len();
                counts[i / 2] += f.find_iter(piece).filter(|&at| at + len > skip).count();
            }
            if let Some(sh) = &shapes {
                sh.find(piece, skip, &mut out.shaped);
            }
        });
        out.processes.push(ProcessScan {
            pid,
            comm: name,
            bytes: read.unwrap_or(0),
            counts,
            unreadable: read.is_none(),
        });
    }
    out
}

/// The token-shape search of [`scan_memory_and_shapes`].
struct Shapes {
    narrow: memmem::Finder<'static>,
    wide: memmem::Finder<'static>,
    prefix: usize,
    rest: usize,
}

impl Shapes {
    fn new(prefix: &[u8], rest: usize) -> Shapes {
        Shapes {
            narrow: memmem::Finder::new(prefix).into_owned(),
            wide: memmem::Finder::new(&utf16le(prefix)).into_owned(),
            prefix: prefix.len(),
            rest,
        }
    }

    /// The longest shaped string, in bytes (UTF-16), less one.
    fn overlap(&self) -> usize {
        2 * (self.prefix + self.rest) - 1
    }

    /// Adds the hash of each shaped string of `piece` that ends past `skip`.
    fn find(&self, piece: &[u8], skip: usize, out: &mut BTreeMap<String, usize>) {
        let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
        let len = self.prefix + self.rest;
        for at in self.narrow.find_iter(piece) {
            match piece.get(at..at + len) {
                Some(c) if at + len > skip && c[self.prefix..].iter().all(|&b| ok(b)) => {
                    *out.entry(crate::sha256_hex(c)).or_default() += 1;
                }
                _ => {}
            }
        }
        for at in self.wide.find_iter(piece) {
            let Some(c) = piece.get(at..at + 2 * len) else {
                continue;
            };
            let narrow: Vec<u8> = c
                .chunks_exact(2)
                .map(|p| if p[1] == 0 { p[0] } else { 0 })
                .collect();
            if at + 2 * len > skip && narrow[self.prefix..].iter().all(|&b| ok(b)) {
                *out.entry(crate::sha256_hex(&narrow)).or_default() += 1;
            }
        }
    }
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
