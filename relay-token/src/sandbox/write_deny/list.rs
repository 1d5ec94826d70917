//! The entries of the list: what a shell, git, ssh or Claude Code reads at start-up from the
//! home folder, a project folder or a repository's git folder.

/// One entry of the list, relative to the folder it applies in: a file or a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Entry {
    /// A file.
    File(&'static str),
    /// A folder.
    Dir(&'static str),
}

impl Entry {
    /// The relative path.
    ///
    /// ```
    /// use relay_token::sandbox::write_deny::Entry;
    /// assert_eq!(Entry::Dir(".git/hooks").rel(), ".git/hooks");
    /// ```
    pub fn rel(self) -> &'static str {
        match self {
            Entry::File(p) | Entry::Dir(p) => p,
        }
    }

    /// True for a folder.
    pub(super) fn is_dir(self) -> bool {
        match self {
            Entry::Dir(_) => true,
            Entry::File(_) => false,
        }
    }
}

/// Read from the home folder: shell start-up files, git's user configuration, ripgrep's, ssh's
/// folder, and the folders programs are commonly installed to: `~/.local/bin`, `~/bin`, Claude
/// Code's native installer's versions (`~/.local/bin/claude` links to
/// `~/.local/share/claude/versions/<version>`), and npm's user prefixes (`~/.npm-global`, and
/// `~/.local`'s packages in `~/.local/lib/node_modules`), where a link in a `bin` folder leads.
pub const HOME: &[Entry] = &[
    Entry::File(".bashrc"),
    Entry::File(".bash_profile"),
    Entry::File(".bash_login"),
    Entry::File(".profile"),
    Entry::File(".zshrc"),
    Entry::File(".zprofile"),
    Entry::File(".zshenv"),
    Entry::File(".zlogin"),
    Entry::File(".config/fish/config.fish"),
    Entry::File(".gitconfig"),
    Entry::File(".ripgreprc"),
    Entry::Dir(".ssh"),
    Entry::Dir(".local/bin"),
    Entry::Dir(".local/share/claude"),
    Entry::Dir("bin"),
    Entry::Dir(".npm-global"),
    Entry::Dir(".local/lib/node_modules"),
];

/// Read from a project folder: its submodule list, MCP server list and editor folders.
pub const PROJECT: &[Entry] = &[
    Entry::File(".gitmodules"),
    Entry::File(".mcp.json"),
    Entry::Dir(".vscode"),
    Entry::Dir(".idea"),
];

/// Read from a project folder (and the home folder) by Claude Code: its commands and agents.
pub const CLAUDE: &[Entry] = &[Entry::Dir(".claude/commands"), Entry::Dir(".claude/agents")];

/// Read from a repository's git folder (relative to the folder holding `.git`): its
/// configuration (and `config.worktree`, which git reads as configuration of the main worktree
/// once `extensions.worktreeConfig` is on), hooks, `info/` (attributes, excludes), and the folders of its submodules and
/// linked worktrees (each with a configuration and hooks of its own).
pub const REPOSITORY: &[Entry] = &[
    Entry::File(".git/config"),
    Entry::File(".git/config.worktree"),
    Entry::Dir(".git/hooks"),
    Entry::Dir(".git/info"),
    Entry::Dir(".git/modules"),
    Entry::Dir(".git/worktrees"),
];

/// Also written by no session that gets no token: Claude Code's project settings. A session
/// holding the token may keep writing its own (it gains nothing by arming the next).
pub const NO_TOKEN: &[Entry] = &[
    Entry::File(".claude/settings.json"),
    Entry::File(".claude/settings.local.json"),
];
