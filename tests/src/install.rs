//! Claude Code as people install it, and the built-in template as shipped: the two halves of
//! "what users run is what the tests run" for the real-Claude tests.
//!
//! - [`Install`]: the npm package (`.tools/claude-code`, `claude` in its `node_modules/.bin`), or
//!   the native installer's layout (`~/.local/bin/claude` -> `~/.local/share/claude/versions/<v>`)
//!   built in the test's HOME from the npm package's native binary.
//! - [`shipped_settings`]: the operator's settings a test writes: the built-in `claude-code`
//!   template exactly as relay ships it, only `api_base_url` (the documented gateway setting)
//!   pointed at the Messages API fixture. [`assert_as_shipped`] fails a test whose settings'
//!   templates differ from the built-in ones in their command, environment or sandbox.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use relay_host::settings::{Settings, Template};
use serde_json::{json, Value};

/// How the turn's Claude Code is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Install {
    /// The npm package ([`crate::claude_cli`], a local install): `claude` on `PATH` from the
    /// package's `node_modules/.bin`, a link to the package's native binary.
    Npm,
    /// `npm install -g` with a system prefix (as `/usr/local`, here `<root>/usr-local`, outside
    /// the home): `<prefix>/bin/claude` -> `../lib/node_modules/@anthropic-ai/claude-code/
    /// bin/claude.exe`, the package's `package.json` and native binary copied there;
    /// `<prefix>/bin` on `PATH`.
    NpmSystemPrefix,
    /// `npm install -g` with a user prefix in the home (`~/.npm-global`, as npm's own docs
    /// suggest), laid out as [`Install::NpmSystemPrefix`]; `~/.npm-global/bin` on `PATH`.
    NpmUserPrefix,
    /// The native installer's layout in the test's HOME: `~/.local/bin/claude`, a symlink to
    /// `~/.local/share/claude/versions/<version>`, a copy of the npm package's native binary;
    /// `~/.local/bin` on `PATH`.
    Native,
}

/// Claude Code installed for one test.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The folder to put first on `PATH`.
    pub bin: PathBuf,
    /// The `claude` found there.
    pub claude: PathBuf,
    /// The folder the test copied the 400 MB binary into, if any (no session can write it; the
    /// token scan leaves it out).
    pub copy: Option<PathBuf>,
}

impl Install {
    /// Installs Claude Code this way for a test whose folders are under `root` with the home
    /// `home` (the layouts are made there).
    ///
    /// ```no_run
    /// use relay_tests::install::Install;
    /// let root = tempfile::tempdir()?;
    /// let home = root.path().join("home");
    /// let i = Install::Native.install(root.path(), &home);
    /// assert_eq!(i.claude, home.join(".local/bin/claude"));
    /// assert_eq!(i.bin, home.join(".local/bin"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn install(self, root: &Path, home: &Path) -> Installed {
        let npm = crate::claude_cli();
        match self {
            Install::Npm => Installed {
                bin: npm.parent().expect("the CLI's folder").to_path_buf(),
                claude: npm,
                copy: None,
            },
            Install::NpmSystemPrefix => npm_global(&root.join("usr-local"), &npm),
            Install::NpmUserPrefix => npm_global(&home.join(".npm-global"), &npm),
            Install::Native => native_layout(home, &npm),
        }
    }
}

/// The npm package's native binary (`bin/claude.exe`, which the package's postinstall step
/// makes the platform's binary), by its real path; panics when the package ships none.
fn native_binary(npm: &Path) -> PathBuf {
    let real = npm.canonicalize().expect("the CLI's real path");
    let head = std::fs::read(&real).map(|b| b[..4.min(b.len())].to_vec());
    assert_eq!(
        head.as_deref().ok(),
        Some(&b"\x7fELF"[..]),
        "{} is not a native binary: this npm package of Claude Code ships none, so the other \
         layouts cannot be made from it",
        real.display()
    );
    real
}

/// Copies `from` to `to` (mode 0755), never a hard link: a test that hands its tree to another
/// user chowns it.
fn copy_program(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().expect("a folder")).unwrap();
    crate::copy_program(from, to);
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `npm install -g`'s layout under `prefix`: the package in `lib/node_modules` (its manifest
/// and native binary), `bin/claude` a relative link into it.
fn npm_global(prefix: &Path, npm: &Path) -> Installed {
    let real = native_binary(npm);
    let package = prefix.join("lib/node_modules/@anthropic-ai/claude-code");
    copy_program(&real, &package.join("bin/claude.exe"));
    let manifest = real.parent().and_then(Path::parent).expect("the package");
    std::fs::copy(manifest.join("package.json"), package.join("package.json")).unwrap();
    let bin = prefix.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::os::unix::fs::symlink(
        "../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
        &claude,
    )
    .unwrap();
    let copy = Some(prefix.join("lib/node_modules"));
    Installed { bin, claude, copy }
}

/// The native installer's layout under `home`, made from the npm package's native binary.
fn native_layout(home: &Path, npm: &Path) -> Installed {
    let real = native_binary(npm);
    let versions = home.join(".local/share/claude/versions");
    copy_program(&real, &versions.join(package_version(&real)));
    let bin = home.join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::os::unix::fs::symlink(versions.join(package_version(&real)), &claude).unwrap();
    Installed {
        bin,
        claude,
        copy: Some(versions),
    }
}

/// The version in the npm package's `package.json` (the folder above `bin/`).
fn package_version(real: &Path) -> String {
    let manifest = real
        .parent()
        .and_then(Path::parent)
        .expect("the CLI's package folder")
        .join("package.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    v["version"].as_str().expect("a version").to_string()
}

/// The built-in template `id`, as relay ships it.
///
/// ```
/// let t = relay_tests::install::shipped("claude-code");
/// assert_eq!(t.command, ["claude"]);
/// ```
pub fn shipped(id: &str) -> Template {
    relay_host::settings::builtin_templates()
        .into_iter()
        .find(|t| t.id == id)
        .unwrap_or_else(|| panic!("no built-in template {id:?}"))
}

/// The settings of a real-Claude test: the token file at `~/.config/claude-ltt/token` and the
/// built-in `claude-code` template as shipped, its `api_base_url` at `gateway`. A plain
/// `http://` gateway (on the loopback) is accepted only while no template shares the host's
/// network, so then the built-in `shell` gets `"network": "none"` (the operator's network
/// setting, as documented); and it is pipe mode's only (stand-in mode swaps the token inside
/// TLS), so then the template gets `"token_mode": "pipe"`, the documented opt-out.
///
/// ```
/// let s = relay_tests::install::shipped_settings("http://127.0.0.1:9");
/// assert_eq!(s["templates"][0]["api_base_url"], "http://127.0.0.1:9");
/// assert_eq!(s["templates"][0]["token_mode"], "pipe");
/// assert_eq!(s["templates"][1]["network"], "none");
/// ```
pub fn shipped_settings(gateway: &str) -> Value {
    let mut s = shipped_settings_as_is();
    s["templates"][0]["api_base_url"] = json!(gateway);
    if gateway.starts_with("http://") {
        // Stand-in mode swaps the token inside TLS only: a plain gateway is pipe mode's.
        s["templates"][0]["token_mode"] = json!("pipe");
        let mut shell = shipped_json("shell");
        shell["network"] = json!("none");
        s["templates"].as_array_mut().expect("a list").push(shell);
    }
    s
}

/// What a new user's settings hold: the token file at `~/.config/claude-ltt/token` and the
/// built-in `claude-code` template exactly as shipped.
///
/// ```
/// let s = relay_tests::install::shipped_settings_as_is();
/// assert!(s["templates"][0].get("api_base_url").is_none());
/// ```
pub fn shipped_settings_as_is() -> Value {
    let t = shipped_json("claude-code");
    json!({"claude_token_file": "~/.config/claude-ltt/token", "templates": [t]})
}

/// The built-in template `id` as settings JSON, `token_mode` left out as a new user leaves it
/// (the built-in's default applies: stand-in mode for `claude-code` on Linux).
///
/// ```
/// let t = relay_tests::install::shipped_json("claude-code");
/// assert!(t.get("token_mode").is_none());
/// assert_eq!(t["id"], "claude-code");
/// ```
pub fn shipped_json(id: &str) -> Value {
    let mut t = serde_json::to_value(shipped(id)).expect("a template serializes");
    t.as_object_mut().expect("an object").remove("token_mode");
    t
}

/// Panics unless the fake agent's record `rec` (`tests/src/bin/fake-agent.rs`) read on fd 5 what
/// the built-in `claude-code` template as shipped hands over for `token`: on Linux a stand-in
/// (never the token's hash; a setup token's length at least: the prefix and 32 random
/// characters), elsewhere the token itself.
///
/// ```
/// let rec = serde_json::json!({"token_fd_var": "5", "token_sha256": "00", "token_bytes": 77});
/// # #[cfg(target_os = "linux")]
/// relay_tests::install::assert_fd5_as_shipped(&rec, "sk-ant-oat01-real");
/// ```
pub fn assert_fd5_as_shipped(rec: &Value, token: &str) {
    assert_eq!(rec["token_fd_var"], "5", "{rec}");
    let real = crate::sha256_hex(token.as_bytes());
    if cfg!(target_os = "linux") {
        let sha = rec["token_sha256"].as_str().expect("fd 5 was read");
        assert_ne!(sha, real, "the real token on fd 5, not a stand-in");
        let least = "sk-ant-oat01-".len() + 32;
        let bytes = rec["token_bytes"].as_u64().expect("a length");
        assert!(bytes >= least as u64, "{rec}");
    } else {
        assert_eq!(rec["token_sha256"], real, "{rec}");
    }
}

/// Panics unless every template in the settings of `config` is a built-in one as shipped: its
/// command, environment, sandbox and request variables exactly the built-in's. Only the
/// operator's network settings may differ: `api_base_url` (the documented gateway setting),
/// `network` (a test that needs a second host reachable) and `token_mode`. What the tests run
/// is what users run.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let s = relay_tests::install::shipped_settings("http://127.0.0.1:9");
/// std::fs::write(dir.path().join("settings.json"), s.to_string())?;
/// relay_tests::install::assert_as_shipped(dir.path());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn assert_as_shipped(config: &Path) {
    let settings = Settings::load(config).expect("the test's settings load");
    for t in &settings.templates {
        let mut plain = t.clone();
        let built_in = shipped(&t.id);
        plain.api_base_url = None;
        plain.network = built_in.network.clone();
        plain.token_mode = built_in.token_mode;
        assert_eq!(
            plain, built_in,
            "the test's template {:?} is not the built-in one as shipped (only api_base_url and \
             network and token_mode may differ)",
            t.id
        );
    }
}
