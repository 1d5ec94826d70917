//! `upstream_ca_file`, read by relay-host once per stand-in launch and handed on as bytes: a
//! session must not be able to put a CA of its own in it (it would then read the real token on
//! its way upstream). The path as written, each symlink met on the way to the file and the real
//! path are checked against every read-write grant (the launch's own project included); the
//! file is then opened by its real path without following a link, and its owner and mode are
//! checked on the open descriptor, as the token file's are. The system trust store's bundle
//! is read the same way, and must be root's.

use std::fmt;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::{holder, ownership, Exposure, Ownership};

/// The largest `upstream_ca_file` read.
const MAX_CA_FILE: u64 = 4 << 20;

/// How many symlinks a path may pass through (as the kernel's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Why `upstream_ca_file` was not read.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum UpstreamCaError {
    /// A session could have written it, or its owner or mode is not the host's.
    Reach(Exposure),
    /// It could not be read.
    Io {
        /// The setting's path, as written.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The system trust store's bundle ([`read_system_ca`]) cannot be trusted or read.
    #[cfg(target_os = "linux")]
    System {
        /// The bundle.
        path: PathBuf,
        /// What is wrong, in words.
        why: String,
    },
}

impl fmt::Display for UpstreamCaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamCaError::Reach(e) => e.fmt(f),
            UpstreamCaError::Io { path, source } => {
                write!(f, "upstream_ca_file {}: {source}", path.display())
            }
            #[cfg(target_os = "linux")]
            UpstreamCaError::System { path, why } => write!(
                f,
                "the system CA bundle {}: {why} (relay-stand-in trusts it as Claude Code does)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for UpstreamCaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UpstreamCaError::Reach(e) => Some(e),
            UpstreamCaError::Io { source, .. } => Some(source),
            #[cfg(target_os = "linux")]
            UpstreamCaError::System { .. } => None,
        }
    }
}

/// The bytes of `upstream_ca_file` at `path`, read once, when no session could have written
/// the file or any link on the way to it (`grants`: every template's read-write grants, the
/// launch's project included; a path inside `config_dir`, which every sandbox masks, is out of
/// every session's reach), and its owner and mode are the host's (no write bit for group
/// or others; owned by relay-host's user or root). The caller hands the bytes on, never the
/// path.
pub(crate) fn read_upstream_ca(
    path: &Path,
    config_dir: &Path,
    grants: &[PathBuf],
) -> Result<Vec<u8>, UpstreamCaError> {
    let path_buf = path.to_path_buf();
    read_checked(path, config_dir, grants, false).map_err(|p| match p {
        Problem::Reach { reached, grant } => UpstreamCaError::Reach(Exposure::CaFileReach {
            path: path_buf,
            reached,
            grant,
        }),
        Problem::Owner(Ownership::Mode(mode)) => UpstreamCaError::Reach(Exposure::CaFileMode {
            path: path_buf,
            mode,
        }),
        Problem::Owner(Ownership::Owner { uid, me }) => {
            UpstreamCaError::Reach(Exposure::CaFileOwner {
                path: path_buf,
                uid,
                me,
            })
        }
        Problem::Io(source) => UpstreamCaError::Io {
            path: path_buf,
            source,
        },
    })
}

/// Where Linux distributions keep the system trust store as one PEM bundle, the first that
/// exists being the system's: what Claude Code's native binary verifies the API against (Go's
/// and OpenSSL's lists, in their order).
#[cfg(target_os = "linux")]
const SYSTEM_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The system trust store's bundle, read once: the first of [`SYSTEM_CA_BUNDLES`] that exists,
/// and its bytes, or `None` when the system has none of them. It must be root's: the file
/// owned by root with no write bit for group or others, no link on the way to it or its real
/// path inside a read-write grant (`grants`, as for [`read_upstream_ca`]). A bundle that fails
/// is an error naming it, never a reason to look further.
#[cfg(target_os = "linux")]
pub(crate) fn read_system_ca(
    config_dir: &Path,
    grants: &[PathBuf],
) -> Result<Option<(PathBuf, Vec<u8>)>, UpstreamCaError> {
    let Some(path) = SYSTEM_CA_BUNDLES
        .iter()
        .map(Path::new)
        .find(|p| std::fs::symlink_metadata(p).is_ok())
    else {
        return Ok(None);
    };
    let why = match read_checked(path, config_dir, grants, true) {
        Ok(bytes) => return Ok(Some((path.to_path_buf(), bytes))),
        Err(Problem::Reach { reached, grant }) => format!(
            "{} lies inside the read-write grant {}, where a session could add a CA of its own",
            reached.display(),
            grant.display()
        ),
        Err(Problem::Owner(Ownership::Mode(mode))) => {
            format!("mode {mode:04o} lets others write it; chmod go-w it")
        }
        Err(Problem::Owner(Ownership::Owner { uid, .. })) => {
            format!("owned by uid {uid}, not by root")
        }
        Err(Problem::Io(e)) => e.to_string(),
    };
    Err(UpstreamCaError::System {
        path: path.to_path_buf(),
        why,
    })
}

/// What made a trusted file unusable, before it is named as the setting's or the system's.
enum Problem {
    /// The file, a link on the way or its real path lies inside a read-write grant.
    Reach { reached: PathBuf, grant: PathBuf },
    /// Its owner or mode.
    Owner(Ownership),
    /// It could not be read.
    Io(io::Error),
}

/// The bytes of the trusted file `path` (at most 4 MiB, a regular file), when no session could
/// have written it or a link on the way (see [`read_upstream_ca`]) and its owner and mode pass
/// (`root_only`: owned by root, else by relay-host's user or root).
fn read_checked(
    path: &Path,
    config_dir: &Path,
    grants: &[PathBuf],
    root_only: bool,
) -> Result<Vec<u8>, Problem> {
    let (real, links) = resolve(path).map_err(Problem::Io)?;
    let config = config_dir
        .canonicalize()
        .unwrap_or(config_dir.to_path_buf());
    let masked = |p: &Path| p.starts_with(config_dir) || p.starts_with(&config);
    let on_the_way = std::iter::once(path).chain(links.iter().map(PathBuf::as_path));
    for p in on_the_way.chain(std::iter::once(real.as_path())) {
        if let Some(g) = holder(grants, p).filter(|_| !masked(p)) {
            return Err(Problem::Reach {
                reached: p.to_path_buf(),
                grant: g.clone(),
            });
        }
    }
    let f = open_no_follow(&real).map_err(Problem::Io)?;
    let m = f.metadata().map_err(Problem::Io)?;
    if !m.is_file() {
        let source = io::Error::new(io::ErrorKind::InvalidData, "not a regular file");
        return Err(Problem::Io(source));
    }
    if let Some(o) = ownership(&m, 0o022) {
        return Err(Problem::Owner(o));
    }
    if root_only && m.uid() != 0 {
        let (uid, me) = (m.uid(), 0);
        return Err(Problem::Owner(Ownership::Owner { uid, me }));
    }
    let mut bytes = Vec::new();
    f.take(MAX_CA_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(Problem::Io)?;
    if bytes.len() as u64 > MAX_CA_FILE {
        let source = io::Error::new(io::ErrorKind::InvalidData, "larger than 4 MiB");
        return Err(Problem::Io(source));
    }
    Ok(bytes)
}

/// Opens `real` for reading without following a final symlink, and without waiting on a FIFO.
fn open_no_follow(real: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(real)
}

/// The real path of absolute `path`, and each symlink met on the way to it (by the path it was
/// met at), resolved one component at a time as the kernel does.
fn resolve(path: &Path) -> io::Result<(PathBuf, Vec<PathBuf>)> {
    if !path.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "give an absolute path",
        ));
    }
    let mut links = Vec::new();
    let mut todo: Vec<PathBuf> = rest_of(path);
    let mut at = PathBuf::from("/");
    while let Some(c) = todo.pop() {
        if c.as_os_str() == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&c);
        let m = std::fs::symlink_metadata(&next)?;
        if !m.file_type().is_symlink() {
            at = next;
            continue;
        }
        if links.len() == MAX_LINKS {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        let target = std::fs::read_link(&next)?;
        links.push(next);
        if target.is_absolute() {
            at = PathBuf::from("/");
        }
        todo.extend(rest_of(&target));
    }
    Ok((at, links))
}

/// `p`'s normal and `..` components, last first (a stack to pop).
fn rest_of(p: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(PathBuf::from(n)),
            Component::ParentDir => Some(PathBuf::from("..")),
            _ => None,
        })
        .collect();
    v.reverse();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_link_on_the_way_and_the_real_path_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        std::fs::create_dir(d.join("real")).unwrap();
        std::fs::write(d.join("real/ca.pem"), "x").unwrap();
        std::os::unix::fs::symlink("real", d.join("dir")).unwrap();
        std::os::unix::fs::symlink(d.join("dir/ca.pem"), d.join("top.pem")).unwrap();
        let (real, links) = resolve(&d.join("top.pem")).unwrap();
        assert_eq!(real, d.join("real/ca.pem"));
        assert_eq!(links, [d.join("top.pem"), d.join("dir")]);
        let (real, _) = resolve(&d.join("real/../real/./ca.pem")).unwrap();
        assert_eq!(real, d.join("real/ca.pem"));
        std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
        let e = resolve(&d.join("loop")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
    }

    #[test]
    fn a_link_inside_a_grant_is_refused_though_its_target_is_outside() {
        let home = tempfile::tempdir().unwrap();
        let etc = tempfile::tempdir().unwrap();
        let (h, e) = (
            home.path().canonicalize().unwrap(),
            etc.path().canonicalize().unwrap(),
        );
        std::fs::write(e.join("ca.pem"), "x").unwrap();
        std::os::unix::fs::symlink(e.join("ca.pem"), h.join("ca.pem")).unwrap();
        // Written outside every grant, through a link inside one.
        std::os::unix::fs::symlink(h.join("ca.pem"), e.join("via.pem")).unwrap();
        let none = Path::new("/nonexistent");
        let err = read_upstream_ca(&e.join("via.pem"), none, std::slice::from_ref(&h)).unwrap_err();
        let UpstreamCaError::Reach(Exposure::CaFileReach { reached, .. }) = err else {
            panic!("{err}")
        };
        assert_eq!(reached, h.join("ca.pem"));
        assert_eq!(
            read_upstream_ca(&e.join("via.pem"), none, &[]).unwrap(),
            b"x"
        );
        // The config folder is masked in every sandbox: a file there is out of reach.
        assert_eq!(
            read_upstream_ca(&h.join("ca.pem"), &h, std::slice::from_ref(&h)).unwrap(),
            b"x"
        );
    }

    #[test]
    fn a_file_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("ca.pem");
        std::fs::write(&f, "x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        let none = Path::new("/nonexistent");
        let e = read_upstream_ca(&f, none, &[]).unwrap_err().to_string();
        assert!(
            e.ends_with("mode 0666 lets others write it; chmod go-w it"),
            "{e}"
        );
        let e = read_upstream_ca(dir.path(), none, &[])
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("not a regular file"), "{e}");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_system_bundle_is_found_and_refused_inside_a_grant() {
        let none = Path::new("/nonexistent");
        let Some((path, bytes)) = read_system_ca(none, &[]).unwrap() else {
            return; // a system without a bundle: webpki's roots, nothing to check here
        };
        assert!(String::from_utf8_lossy(&bytes).contains("BEGIN CERTIFICATE"));
        let e = read_system_ca(none, &[PathBuf::from("/etc")]).unwrap_err();
        let shown = path.display();
        assert!(
            e.to_string()
                .starts_with(&format!("the system CA bundle {shown}: ")),
            "{e}"
        );
        assert!(
            e.to_string().contains("inside the read-write grant /etc"),
            "{e}"
        );
    }

    /// `UpstreamCaError`'s example.
    #[test]
    fn upstream_ca_error_doc_example() {
        let ca = std::path::Path::new("/nonexistent/ca.pem");
        let e = crate::reach::read_upstream_ca(ca, "/c".as_ref(), &[]).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("upstream_ca_file /nonexistent/ca.pem: "));
    }

    /// `read_upstream_ca`'s example.
    #[test]
    fn read_upstream_ca_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            let ca = dir.path().join("ca.pem");
            std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\n")?;
            let config = std::path::Path::new("/nonexistent/relay");
            assert!(crate::reach::read_upstream_ca(&ca, config, &[]).is_ok());
            let grants = [dir.path().to_path_buf()];
            let e = crate::reach::read_upstream_ca(&ca, config, &grants).unwrap_err();
            assert!(e.to_string().contains("lies inside the read-write grant"));
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }

    /// `SYSTEM_CA_BUNDLES`'s example.
    #[test]
    #[cfg(target_os = "linux")]
    fn system_ca_bundles_doc_example() {
        assert_eq!(
            super::SYSTEM_CA_BUNDLES[0],
            "/etc/ssl/certs/ca-certificates.crt"
        );
    }

    /// `read_system_ca`'s example.
    #[test]
    #[cfg(target_os = "linux")]
    fn read_system_ca_doc_example() {
        let found = super::read_system_ca("/nonexistent".as_ref(), &[]);
        if let Ok(Some((path, bytes))) = found {
            assert!(super::SYSTEM_CA_BUNDLES.contains(&path.to_str().unwrap()));
            assert!(!bytes.is_empty());
        }
    }
}
