//! An embedder's view: a throwaway crate that depends on `relay-token` with default features
//! (a path dependency, built offline into a target folder kept under this workspace's target),
//! calls `read_claude_token` and `TokenPipe::spawn`, and sees libc, secrecy and zeroize as the
//! library's only dependencies.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

const TOKEN: &str = "sk-ant-oat01-default-features-TEST-41c7";

const MAIN: &str = r#"
use std::process::{Command, Stdio};
use relay_token::{read_claude_token, TokenPipe};

fn main() {
    let path = std::env::args_os().nth(1).expect("TOKEN_FILE");
    let token = read_claude_token(path.as_ref()).expect("token");
    let pipe = TokenPipe::new(&token).expect("pipe");
    drop(token);
    let out = pipe
        .spawn(
            Command::new("sh")
                .args(["-c", "cat <&$CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR | sha256sum"])
                .stdout(Stdio::piped()),
        )
        .expect("spawn")
        .wait_with_output()
        .expect("wait");
    print!("{}", String::from_utf8_lossy(&out.stdout));
}
"#;

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // Kept between runs, so only the first one builds libc, secrecy and zeroize.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("default-features-embedder");
    cmd.env("CARGO_TARGET_DIR", target).arg("--quiet");
    cmd
}

/// The throwaway crate, with this workspace's lock file so it resolves offline.
fn embedder() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let lib = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = format!(
        "[package]\nname = \"embedder\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nrelay-token = {{ path = {:?} }}\n\n[workspace]\n",
        lib.display().to_string()
    );
    fs::write(dir.path().join("Cargo.toml"), manifest).unwrap();
    fs::copy(lib.join("../Cargo.lock"), dir.path().join("Cargo.lock")).unwrap();
    fs::create_dir(dir.path().join("src")).unwrap();
    fs::write(dir.path().join("src/main.rs"), MAIN).unwrap();
    let manifest = dir.path().join("Cargo.toml");
    (dir, manifest)
}

#[test]
fn a_default_feature_embedder_builds_and_hands_the_token_over() {
    let (dir, manifest) = embedder();
    let token_file = dir.path().join("token");
    fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let out = cargo()
        .args(["run", "--offline", "--manifest-path"])
        .arg(&manifest)
        .arg("--")
        .arg(&token_file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo run: {stderr}");
    let want = format!("{:x}  -\n", Sha256::digest(TOKEN.as_bytes()));
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
}

#[test]
fn default_features_depend_on_libc_secrecy_and_zeroize_only() {
    let (_dir, manifest) = embedder();
    let out = cargo()
        .args(["tree", "--offline", "-e", "normal", "--prefix", "none"])
        .args(["--format", "{p}", "-p", "relay-token", "--depth", "1"])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<&str> = stdout
        .lines()
        .skip(1) // relay-token itself
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["libc", "secrecy", "zeroize"]);
}
