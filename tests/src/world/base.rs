//! The world itself: its folders, its token, its settings.

use std::collections::BTreeMap;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use crate::fixture::{Folders, Layout};

/// The deadline of one `relay-host` command ([`World::launch`], [`World::host`]).
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The deadline of a token session running a script ([`World::run_token_script`]).
pub const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// The variable Claude Code reads the token descriptor from.
pub const VAR: &str = "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR";

/// The `claude_token_file` setting of a world in [`Layout::agent`].
pub const SETTING: &str = "~/.config/acme-ltt/token";

/// The unprivileged user the `_as_a_user` tests run `relay-host` as (`nobody`).
pub const NOBODY: u32 = 65534;

/// Which token a world starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    /// A fresh [`crate::fake_token`].
    Fake,
    /// A fresh [`crate::claude_fake_token`] (Claude Code takes it as an OAuth token).
    Claude,
}

/// How to make a [`World`]; see [`World::builder`].
#[derive(Debug, Clone)]
pub struct Builder {
    layout: Layout,
    token: Token,
    written: bool,
    newline: bool,
    record: &'static str,
    agent: Option<PathBuf>,
    user: Option<u32>,
}

impl Builder {
    /// The folders' layout (default: [`Layout::agent`]`("relay-world.")`).
    pub fn layout(mut self, layout: Layout) -> Builder {
        self.layout = layout;
        self
    }

    /// The token the world starts with (default: [`Token::Fake`]).
    pub fn token(mut self, token: Token) -> Builder {
        self.token = token;
        self
    }

    /// Whether the token file is written at the start (default: yes; without it, a test writes
    /// one with [`World::fresh_token`] or [`World::replace_token`]).
    pub fn written(mut self, written: bool) -> Builder {
        self.written = written;
        self
    }

    /// Whether the token file ends in a newline (default: yes, to prove the trim).
    pub fn newline(mut self, newline: bool) -> Builder {
        self.newline = newline;
        self
    }

    /// The fake agent's record file, in the project (default `rec.jsonl`, where
    /// [`crate::fake_agent_template`] records).
    pub fn record(mut self, name: &'static str) -> Builder {
        self.record = name;
        self
    }

    /// Settings whose `claude-code` template runs `agent` (read-write `{project}`, pipe mode),
    /// the record at `record.jsonl` (default: no settings written).
    pub fn agent(mut self, agent: &Path) -> Builder {
        self.agent = Some(agent.to_path_buf());
        self.record = "record.jsonl";
        self
    }

    /// `relay-host` runs as `user` through `setpriv`, the whole tree handed to it before each
    /// run ([`World::hand_over`]; default: the test's own user, root).
    pub fn user(mut self, user: Option<u32>) -> Builder {
        self.user = user;
        self
    }

    /// Makes the folders, writes the token and the settings asked for.
    pub fn build(self) -> World {
        let folders = Folders::new(self.layout);
        let w = World {
            record: folders.project.join(self.record),
            host: crate::relay_host(),
            token: match (self.written, self.token) {
                (false, _) => String::new(),
                (true, Token::Fake) => crate::fake_token(),
                (true, Token::Claude) => crate::claude_fake_token(),
            },
            tokens: Mutex::new(Vec::new()),
            kind: self.token,
            newline: self.newline,
            user: self.user,
            hand_over_each_run: self.user.is_some(),
            host_env: BTreeMap::new(),
            umask0: false,
            n: AtomicU32::new(0),
            folders,
        };
        if self.written {
            w.write_token(&w.token);
            w.tokens.lock().unwrap().push(w.token.clone());
        }
        if let Some(agent) = self.agent {
            let mut settings = json!({
                "claude_token_file": SETTING,
                "templates": [{
                    "id": "claude-code",
                    "command": [agent],
                    "sandbox": {"read_write": ["{project}"]},
                    "token_mode": "pipe",
                }],
            });
            if let Some(bwrap) = crate::settings_bwrap() {
                settings["bwrap"] = json!(bwrap);
            }
            w.settings(settings);
        }
        w
    }
}

/// One test's installation: its folders (`w.home`, `w.project`, ... through [`Folders`]), its
/// token and how it runs `relay-host`. Dropping it removes the tree.
#[derive(Debug)]
pub struct World {
    folders: Folders,
    /// The token the world started with (empty when not [`Builder::written`]; never printed).
    pub token: String,
    tokens: Mutex<Vec<String>>,
    kind: Token,
    newline: bool,
    /// The fake agent's record file (in the project).
    pub record: PathBuf,
    /// The `relay-host` that runs (the built one; a benchmark may point it at another build,
    /// whose `relay-shim` sits beside it).
    pub host: PathBuf,
    /// The user `relay-host` runs as (`None`: the test's own, root).
    pub user: Option<u32>,
    /// Whether the whole tree is handed to [`World::user`] before each run (as
    /// [`Builder::user`] sets it), or left as it is (a root-owned token file, say).
    pub hand_over_each_run: bool,
    /// Extra variables for `relay-host`'s own environment.
    pub host_env: BTreeMap<String, String>,
    /// Run `relay-host` under umask 0 (to prove it sets its modes itself).
    pub umask0: bool,
    pub(super) n: AtomicU32,
}

/// A world is its folders (`w.home`, `w.project`, ...) and how it runs the host.
impl std::ops::Deref for World {
    type Target = Folders;
    fn deref(&self) -> &Folders {
        &self.folders
    }
}

impl World {
    /// The defaults: [`Layout::agent`], a fake token with a newline, no settings, as root.
    ///
    /// ```no_run
    /// use relay_tests::world::{Token, World};
    /// let w = World::builder().token(Token::Claude).user(Some(65534)).build();
    /// assert!(w.token.starts_with("sk-ant-oat01-"));
    /// ```
    pub fn builder() -> Builder {
        Builder {
            layout: Layout::agent("relay-world."),
            token: Token::Fake,
            written: true,
            newline: true,
            record: "rec.jsonl",
            agent: None,
            user: None,
        }
    }

    /// A world with the defaults of [`World::builder`].
    ///
    /// ```no_run
    /// let w = relay_tests::world::World::new();
    /// assert!(w.token_file.is_file());
    /// ```
    #[allow(clippy::new_without_default)] // makes folders and a token: not a default value
    pub fn new() -> World {
        World::builder().build()
    }

    /// A fake-agent installation: settings whose `claude-code` template runs `agent`
    /// (read-write `{project}`, pipe mode), a fresh token (no newline), the record at
    /// `record.jsonl` (set by [`World::launch_cmd`]).
    ///
    /// ```no_run
    /// let w = relay_tests::world::World::agent(&relay_tests::fake_agent());
    /// assert!(w.config.join("settings.json").is_file());
    /// ```
    pub fn agent(agent: &Path) -> World {
        World::builder()
            .layout(Layout::agent("relay-fx-"))
            .newline(false)
            .agent(agent)
            .build()
    }

    /// Rewrites the token file in place with `token` (0600, a newline as built) without
    /// making it the world's token.
    pub fn write_token(&self, token: &str) {
        let nl = if self.newline { "\n" } else { "" };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&self.token_file)
            .unwrap();
        std::io::Write::write_all(&mut f, format!("{token}{nl}").as_bytes()).unwrap();
        std::fs::set_permissions(&self.token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// A fresh token of the world's kind written in place ([`World::write_token`]), remembered
    /// for the scans, and returned.
    pub fn fresh_token(&self) -> String {
        let token = self.new_token();
        self.write_token(&token);
        token
    }

    /// A fresh token written as a new file renamed over the token file (as an atomic writer
    /// makes it), remembered for the scans, and returned.
    pub fn replace_token(&self) -> String {
        let token = self.new_token();
        let tmp = self.root.join("token.new");
        let nl = if self.newline { "\n" } else { "" };
        std::fs::write(&tmp, format!("{token}{nl}")).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::rename(&tmp, &self.token_file).unwrap();
        token
    }

    fn new_token(&self) -> String {
        let token = match self.kind {
            Token::Claude => crate::claude_fake_token(),
            Token::Fake => crate::fake_token(),
        };
        self.tokens.lock().unwrap().push(token.clone());
        token
    }

    /// Every token this world wrote, oldest first.
    pub fn tokens(&self) -> Vec<String> {
        self.tokens.lock().unwrap().clone()
    }

    /// Writes `settings.json` (0644 whatever the umask: a host run as another user reads it).
    pub fn settings(&self, v: Value) {
        let p = self.config.join("settings.json");
        std::fs::write(&p, v.to_string()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    /// The token setting ([`SETTING`]) and these templates.
    pub fn with_token(&self, templates: Vec<Value>) {
        self.settings(json!({"claude_token_file": SETTING, "templates": templates}));
    }

    /// `settings.json` as written, changed by `edit`.
    pub fn edit_settings(&self, edit: impl FnOnce(&mut Value)) {
        let path = self.config.join("settings.json");
        let mut s: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        edit(&mut s);
        self.settings(s);
    }

    /// Gives the fake agent `args` through the `claude-code` template's command: a launch that
    /// carries the token passes no agent flag in its request.
    pub fn set_agent_args(&self, args: &[&str]) {
        self.edit_settings(|s| {
            let mut command = vec![s["templates"][0]["command"][0].clone()];
            command.extend(args.iter().map(|a| json!(a)));
            s["templates"][0]["command"] = json!(command);
        });
    }

    /// Sets the `claude-code` template's `network` (`"host"` also sets `"token_network":
    /// "host"`, which a token launch with it needs).
    pub fn set_network(&self, network: Value) {
        self.edit_settings(|s| {
            if network == json!("host") {
                s["token_network"] = json!("host");
            }
            s["templates"][0]["network"] = network;
        });
    }

    /// Sets the `bwrap` setting: the bubblewrap every sandboxed launch runs.
    pub fn set_bwrap(&self, bwrap: &Path) {
        self.edit_settings(|s| s["bwrap"] = json!(bwrap));
    }

    /// `n` empty folders `<root>/grants/gNNN`, each to be granted read-write.
    pub fn grant_folders(&self, n: usize) -> Vec<PathBuf> {
        (0..n)
            .map(|i| {
                let g = self.root.join(format!("grants/g{i:03}"));
                std::fs::create_dir_all(&g).unwrap();
                g
            })
            .collect()
    }
}
