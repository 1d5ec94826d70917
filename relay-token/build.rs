//! Builds the preload that makes a token session's program non-dumpable
//! (`preload/nodump.rs`), for Linux targets with the `sandbox` feature: relay-host embeds it.
//! It is compiled by the same `rustc` for the same target, without std or libc.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=preload/nodump.rs");
    println!("cargo::rustc-check-cfg=cfg(relay_nodump)");
    let linux = env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let wanted = env::var_os("CARGO_FEATURE_SANDBOX").is_some();
    if !(linux && wanted && (arch == "x86_64" || arch == "aarch64")) {
        return;
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let status = Command::new(rustc)
        .args([
            "--edition",
            "2021",
            "--crate-type",
            "cdylib",
            "--crate-name",
            "relay_nodump",
        ])
        .args(["--target", &target])
        .args([
            "-C",
            "panic=abort",
            "-C",
            "opt-level=s",
            "-C",
            "strip=symbols",
        ])
        .args(["-C", "link-arg=-nostdlib"])
        .arg("-o")
        .arg(out.join("librelay_nodump.so"))
        .arg("preload/nodump.rs")
        .status()
        .expect("run rustc for preload/nodump.rs");
    assert!(status.success(), "rustc could not build preload/nodump.rs");
    println!("cargo::rustc-cfg=relay_nodump");
}
