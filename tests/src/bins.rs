//! Where the end-to-end tests find the workspace's built binaries, and how they get built.
//!
//! The binaries (`relay-host`, `relay-shim`, `fake-agent`, ...) are found beside the running test
//! or tool: a test runs from `target/<profile>/deps/`, a tool from `target/<profile>/`; both look
//! in `target/<profile>/`.
//!
//! Run by cargo (`cargo test`, which sets `CARGO`), the first look builds them: one `cargo build
//! --workspace --bin relay-host --bin relay-shim --bin relay-net-forward --bin relay-stand-in
//! --bin fake-agent` per test process, into the same target folder and profile (a tenth of a
//! second when they are up to date), so a test never runs a missing or stale binary. Run
//! directly (a test executable started by hand, `CARGO` unset) or with `RELAY_TEST_NO_BUILD=1`, nothing is built: a missing binary fails the
//! test with one message naming the command that builds it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The binaries nearly every end-to-end test runs: built together, in one cargo run.
const COMMON: [&str; 5] = [
    "relay-host",
    "relay-shim",
    "relay-net-forward",
    "relay-stand-in",
    "fake-agent",
];

/// What this process built so far, under a lock: one cargo run at a time, and once per name.
static BUILT: Mutex<Built> = Mutex::new(Built {
    names: Vec::new(),
    failed: None,
});

/// The names built, and the error of a build that failed (given again to every later caller
/// rather than running cargo once per test).
struct Built {
    names: Vec<String>,
    failed: Option<String>,
}

/// The folder that holds the workspace's built binaries for the running profile
/// (`target/debug/` or `target/release/`).
///
/// ```
/// assert!(relay_tests::bin_dir().is_dir());
/// ```
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let mut dir = exe.parent().expect("the executable's folder").to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    dir
}

/// The path of the built binary `name` in [`bin_dir`]. Under cargo it is built first (see the
/// module); when it is still missing, panics with the command that builds it.
///
/// ```no_run
/// let shim = relay_tests::bin("relay-shim");
/// assert!(shim.ends_with("relay-shim"));
/// ```
pub fn bin(name: &str) -> PathBuf {
    let dir = bin_dir();
    let built = build(&dir, name);
    let path = dir.join(name);
    if let Err(why) = built {
        panic!("{why}");
    }
    if !path.is_file() {
        panic!(
            "{} is missing: run `{}` before the tests",
            path.display(),
            build_command_line(&dir)
        );
    }
    path
}

/// Builds `name` (with the common binaries on the first call) into `dir` through cargo, unless
/// this process did already, cargo did not start this process, or `RELAY_TEST_NO_BUILD` is set.
fn build(dir: &Path, name: &str) -> Result<(), String> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Ok(());
    };
    if std::env::var_os("RELAY_TEST_NO_BUILD").is_some_and(|v| !v.is_empty()) {
        return Ok(());
    }
    let Some(target_dir) = target_dir_of(dir) else {
        // Not a plain `target/<profile>` (a cross build): only the caller knows how to build.
        return Ok(());
    };
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = &built.failed {
        return Err(why.clone());
    }
    if built.names.iter().any(|n| n == name) {
        return Ok(());
    }
    let mut names: Vec<&str> = Vec::new();
    if built.names.is_empty() {
        names.extend(COMMON);
    }
    if !names.contains(&name) {
        names.push(name);
    }
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(workspace().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .args(profile_args(dir))
        .arg("--workspace");
    for n in &names {
        cmd.args(["--bin", n]);
    }
    let failed = match cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "`cargo build` of {names:?} for the tests failed ({}); fix the build, or build the \
             binaries yourself with `{}`:\n{}",
            out.status,
            build_command_line(dir),
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Some(format!(
            "cannot run cargo to build {names:?}: {e}; build them with `{}`",
            build_command_line(dir)
        )),
    };
    match failed {
        None => {
            built.names.extend(names.iter().map(|n| n.to_string()));
            Ok(())
        }
        Some(why) => {
            built.failed = Some(why.clone());
            Err(why)
        }
    }
}

/// The workspace's root folder (this crate is `tests/` in it).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

/// The target folder `dir` (`<target>/<profile>`) is in, when it is cargo's own (it holds
/// `CACHEDIR.TAG`); `None` for another layout, such as `<target>/<triple>/<profile>`.
fn target_dir_of(dir: &Path) -> Option<&Path> {
    dir.parent().filter(|t| t.join("CACHEDIR.TAG").is_file())
}

/// Cargo's profile options for the binaries folder `dir`: none for `debug`, `--release` for
/// `release`, `--profile NAME` for another.
fn profile_args(dir: &Path) -> Vec<String> {
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => Vec::new(),
        Some("release") => vec!["--release".into()],
        Some(other) => vec!["--profile".into(), other.into()],
    }
}

/// The command a person runs to build the binaries for `dir`'s profile.
fn build_command_line(dir: &Path) -> String {
    let mut line = String::from("cargo build --workspace --bins");
    for a in profile_args(dir) {
        line.push(' ');
        line.push_str(&a);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_folder_gives_the_profile_options() {
        assert!(profile_args(Path::new("/w/target/debug")).is_empty());
        assert_eq!(profile_args(Path::new("/w/target/release")), ["--release"]);
        assert_eq!(
            profile_args(Path::new("/w/target/bench-lto")),
            ["--profile", "bench-lto"]
        );
        assert_eq!(
            build_command_line(Path::new("/w/target/release")),
            "cargo build --workspace --bins --release"
        );
    }

    #[test]
    fn only_cargos_own_target_folder_is_built_into() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("debug")).unwrap();
        assert_eq!(target_dir_of(&d.path().join("debug")), None);
        std::fs::write(d.path().join("CACHEDIR.TAG"), "Signature").unwrap();
        assert_eq!(target_dir_of(&d.path().join("debug")), Some(d.path()));
    }
}
