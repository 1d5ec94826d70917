//! The one list of paths no sandboxed session may write, even inside a read-write grant.
//!
//! A session must not change what a later launch runs or reads as configuration. Whatever a
//! shell, git, ssh or Claude Code reads at start-up from the home folder, a project folder or a
//! repository's git folder is therefore kept read-only in every sandbox, and one that does not
//! exist yet is kept from being created (see [`Placeholders`]). The list follows Anthropic's
//! sandbox-runtime, which denies writes to the same dotfiles even inside allowed paths, plus what
//! this launcher itself runs.
//!
//! # Where each entry applies
//!
//! An entry means something only where a later launch reads it, so each belongs to one kind of
//! folder, and [`plan`] lays it only there:
//!
//! - **The home folder**: the whole list ([`HOME`], [`PROJECT`], [`CLAUDE`], the repository
//!   entries and,
//!   for a session without the token, [`NO_TOKEN`]); a missing entry is held by a placeholder.
//!   Shells, git, ssh and the user's own editors and Claude Code read them there.
//! - **The project folder**: the whole list too, but a missing [`HOME`] entry is not held (no
//!   program reads `<project>/.bashrc` unless the project is the home folder; one that exists is
//!   still kept read-only, since a dotfiles link in the home folder may lead to it). For a
//!   session without the token the project's `.claude` folder is kept read-only whole (its
//!   commands, agents and settings, and whatever else Claude Code reads from it).
//! - **Any other read-write grant**: only its repository's entries, when it belongs to one.
//!   Any folder inside any grant can be named as a later launch's project, so [`PROJECT`]
//!   entries at a grant's root would guard one folder of many and none of the others: a later
//!   launch's project is guarded by what that launch does itself (Claude Code runs with
//!   `--setting-sources user` unless the project is trusted; git runs with
//!   [`git_guard`](super::git_guard)'s overrides), not by this list. A repository's git folder
//!   is different: git reads it for every folder inside the repository, so a later launch whose
//!   project is anywhere beneath the grant would read what a session wrote there.
//! - **A repository** (the first `.git` found walking up from a home, project or grant folder,
//!   as git finds it: a `.git` folder without `HEAD` is skipped): its `config`, `config.worktree`, `hooks/`, `info/`, `modules/` and `worktrees/`; a `.git`
//!   *file* (a linked worktree, a submodule) is kept read-only itself. Each existing linked
//!   worktree's and submodule's git folder inside `modules/` and `worktrees/` is writable again
//!   (a commit there writes its index, refs and objects), but for what decides what git runs
//!   there ([`git_dirs::STEERING`](super::git_dirs::STEERING)). In the home folder, the
//!   project and every folder above them up to their repository (all the way up when there is
//!   none) that a grant makes writable, a missing `.git` is held by an empty read-only folder:
//!   git skips an empty `.git` and looks further up, and no session can make a repository there
//!   that a later launch's git would find first.
//! - A grant nested inside another folder of the list adds nothing that folder does not already
//!   cover: every path is laid once.
//!
//! A placeholder for a missing *file* in the project is an empty folder of that name, never an
//! empty file: it holds the name just as well, and `git status` lists no empty folder, so a
//! session's `git add -A` cannot commit it (see [DESIGN.md](https://github.com/relay-token/relay-token/blob/main/docs/DESIGN.md)).
//!
//! ```
//! use relay_token::sandbox::write_deny::{Entry, HOME, NO_TOKEN, PROJECT};
//! assert!(HOME.contains(&Entry::Dir(".ssh")));
//! assert!(HOME.contains(&Entry::Dir(".local/share/claude")));
//! assert!(PROJECT.contains(&Entry::File(".mcp.json")));
//! assert!(NO_TOKEN.contains(&Entry::File(".claude/settings.json")));
//! ```

mod list;
mod placeholders;
mod placement;

pub use list::{Entry, CLAUDE, HOME, NO_TOKEN, PROJECT, REPOSITORY};
pub use placeholders::{Placeholders, PLACEHOLDERS_FILE};
pub use placement::{plan, Listed, Role};
