//! The plan, decided from facts alone: no disk, no environment.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::*;
use crate::launch::sandbox::own_config::SANDBOX_HOME;
use relay_token::sandbox::BwrapFeatures;

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

fn grant(path: &str, access: Access) -> Grant {
    Grant {
        path: p(path),
        real: p(path),
        access,
    }
}

/// A token launch of a project `/w/p` under bwrap, with git, a template `PATH`, a request
/// variable, a read grant and two read-write grants (the project and the Claude config).
fn facts() -> Facts {
    Facts {
        system: System::Bwrap,
        grants: vec![
            grant("/h/.config/tool", Access::Read),
            grant("/w/p", Access::ReadWrite),
            grant("/state/sessions/s1/claude", Access::ReadWrite),
        ],
        linked_repository: None,
        command_dir: Some(p("/opt/claude/bin")),
        tmp: p("/state/sessions/s1/tmp"),
        project: Some(p("/w/p")),
        token_file: Some(p("/h/.config/claude-ltt/token")),
        carries_token: true,
        state_dir: p("/state"),
        session_dir: p("/state/sessions/s1"),
        net: SandboxNet::Loopback,
        programs: vec![p("/opt/claude/bin"), p("/usr/bin")],
        home: p("/h"),
        home_real: Some(p("/h")),
        own: vec![OwnFolder {
            path: p("/state"),
            real: p("/state"),
            exists: true,
        }],
        stand_in_ca: None,
        nodump: true,
        git: Some(Git {
            program: p("/usr/bin/git"),
            common: Some(p("/w/p/.git")),
            linked: Vec::new(),
        }),
        template_path: Some("/tpl/bin".into()),
        host_path: Some("/host/bin".into()),
        request_env: vec![("FOO".into(), "bar".into())],
        write_deny_extra: vec![(p("/w/p/extra"), false)],
        features: BwrapFeatures {
            bind_fd: true,
            json_status: true,
        },
        bwrap: p("/usr/bin/bwrap"),
        all_rw_grants: vec![p("/w/p")],
        home_written: false,
    }
}

fn stand_in(f: &mut Facts) {
    f.stand_in_ca = Some(StandInCa {
        file: p("/state/sessions/s1/ca.pem"),
        at: "/run/relay/ca.pem",
        variable: "NODE_EXTRA_CA_CERTS",
    });
}

/// The value the sandboxed program sees: the last one set (bwrap's `--setenv` in order).
fn seen<'a>(env: &'a [(OsString, OsString)], key: &str) -> Option<&'a OsStr> {
    env.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_os_str())
}

fn keys(env: &[(OsString, OsString)]) -> Vec<&str> {
    env.iter().map(|(k, _)| k.to_str().unwrap()).collect()
}

/// The preload comes after every request variable, so a request's `LD_PRELOAD` is overridden;
/// the request's own variables come first and are kept.
#[test]
fn ld_preload_follows_the_request_and_wins() {
    let mut f = facts();
    f.request_env
        .push(("LD_PRELOAD".into(), "/w/p/evil.so".into()));
    let plan = plan(&f);
    assert_eq!(
        seen(&plan.setenv, "LD_PRELOAD"),
        Some(OsStr::new(SANDBOX_PRELOAD))
    );
    assert_eq!(keys(&plan.setenv)[..2], ["FOO", "LD_PRELOAD"]);
    assert_eq!(plan.setenv[1].1, "/w/p/evil.so");
    let ours = plan
        .setenv
        .iter()
        .rposition(|(k, _)| k == "LD_PRELOAD")
        .unwrap();
    assert_eq!(ours, 2, "{:?}", keys(&plan.setenv));
    assert_eq!(plan.files[0], Staged::NoDump);
}

/// Stand-in mode's CA replaces the request's variable (not only follows it) and is placed.
#[test]
fn stand_in_ca_replaces_the_requests() {
    let mut f = facts();
    stand_in(&mut f);
    f.request_env
        .push(("NODE_EXTRA_CA_CERTS".into(), "/w/p/mine.pem".into()));
    let plan = plan(&f);
    let cas: Vec<_> = (plan.setenv.iter())
        .filter(|(k, _)| k == "NODE_EXTRA_CA_CERTS")
        .collect();
    assert_eq!(cas.len(), 1, "{:?}", plan.setenv);
    assert_eq!(cas[0].1, "/run/relay/ca.pem");
    assert!(plan
        .files
        .contains(&Staged::StandInCa(f.stand_in_ca.clone().unwrap())));
}

/// A token launch with git gets the wrapper and `/run/relay/bin` first on `PATH`, before the
/// template's; without a template `PATH` the host's; without git, neither.
#[test]
fn path_leads_with_the_wrapper_only_with_token_and_git() {
    let plan1 = plan(&facts());
    assert_eq!(
        seen(&plan1.setenv, "PATH"),
        Some(OsStr::new("/run/relay/bin:/tpl/bin"))
    );
    assert!(plan1.files.contains(&Staged::GitWrapper));
    assert_eq!(
        seen(&plan1.setenv, "RELAY_GIT"),
        Some(OsStr::new("/usr/bin/git"))
    );
    let mut f = facts();
    f.template_path = None;
    assert_eq!(
        seen(&plan(&f).setenv, "PATH"),
        Some(OsStr::new("/run/relay/bin:/host/bin"))
    );
    f.git = None;
    let no_git = plan(&f);
    assert_eq!(seen(&no_git.setenv, "PATH"), None);
    assert!(!no_git.files.contains(&Staged::GitWrapper));
    let mut f = facts();
    f.carries_token = false;
    let no_token = plan(&f);
    assert_eq!(seen(&no_token.setenv, "PATH"), None);
    assert!(!no_token.files.contains(&Staged::GitWrapper));
}

/// A launch without the token gets no preload, wrapper or pinned configuration: only the
/// request's variables (and stand-in mode's CA, which is not the token's).
#[test]
fn no_token_places_nothing_of_the_tokens() {
    let mut f = facts();
    f.carries_token = false;
    let plan1 = plan(&f);
    assert!(plan1.files.is_empty(), "{:?}", plan1.files);
    assert_eq!(plan1.setenv, f.request_env);
    assert!(!plan1.write_deny.token);
    stand_in(&mut f);
    let plan2 = plan(&f);
    assert_eq!(plan2.files.len(), 1);
    assert!(matches!(plan2.files[0], Staged::StandInCa(_)));
    // The token launch's pinned configuration, set last.
    let token = plan(&facts());
    assert_eq!(token.files.last(), Some(&Staged::OwnConfig));
    assert_eq!(keys(&token.setenv).last(), Some(&"PYTHONNOUSERSITE"));
}

/// Beside a template that writes the home, a token launch's `HOME` is an empty folder of
/// relay's, set last; a launch without the token keeps its `HOME`, and so does a token launch
/// when no template writes the home.
#[test]
fn a_token_launch_beside_a_home_writer_gets_an_empty_home() {
    let mut f = facts();
    f.home_written = true;
    let token = plan(&f);
    assert_eq!(token.files.last(), Some(&Staged::EmptyHome));
    let last = token.setenv.last().unwrap();
    assert_eq!(
        (last.0.to_str(), last.1.to_str()),
        (Some("HOME"), Some(SANDBOX_HOME))
    );
    f.carries_token = false;
    assert!(!plan(&f).files.contains(&Staged::EmptyHome));
    assert!(!plan(&facts()).files.contains(&Staged::EmptyHome));
}

/// macOS's plan holds the profile and the request's variables only, even for the token.
#[test]
fn seatbelt_places_nothing() {
    let mut f = facts();
    f.system = System::Seatbelt;
    stand_in(&mut f);
    let plan = plan(&f);
    assert!(plan.files.is_empty());
    assert_eq!(plan.setenv, f.request_env);
    assert_eq!((plan.bwrap.status_fd, plan.bwrap.bind_fd), (None, false));
    let roles: Vec<_> = plan.write_deny.folders.iter().map(|(_, r)| *r).collect();
    assert_eq!(roles, [Role::Home, Role::Project]);
    assert!(plan.write_deny.extra.is_empty());
}

/// `--json-status-fd` and bind-by-descriptor only where this bwrap has them.
#[test]
fn status_fd_and_bind_fd_follow_the_features() {
    let plan1 = plan(&facts());
    assert_eq!(plan1.bwrap.status_fd, Some(SANDBOX_STATUS_FD));
    assert!(plan1.bwrap.bind_fd);
    let mut f = facts();
    f.features = BwrapFeatures {
        bind_fd: false,
        json_status: false,
    };
    let plan2 = plan(&f);
    assert_eq!((plan2.bwrap.status_fd, plan2.bwrap.bind_fd), (None, false));
}

/// The project is the working folder only with a project; its grant comes from the template's
/// `{project}` (expanded before the plan); the token file is denied.
#[test]
fn project_and_token_deny() {
    let profile = plan(&facts()).profile();
    assert_eq!(profile.denies(), [p("/h/.config/claude-ltt/token")]);
    let mut f = facts();
    f.project = None;
    f.grants.retain(|g| g.path != p("/w/p"));
    f.token_file = None;
    let plan2 = plan(&f);
    assert_eq!(plan2.project, None);
    assert!(plan2.profile().denies().is_empty());
    let roles: Vec<_> = plan2.write_deny.folders.iter().map(|(_, r)| *r).collect();
    assert!(!roles.contains(&Role::Project), "{roles:?}");
}

/// Read grants read-only, read-write grants read-write, a linked worktree's repository
/// read-write after the template's; the write-deny list applies in the read-write ones.
#[test]
fn grants_keep_their_access() {
    let mut f = facts();
    f.linked_repository = Some(p("/w/main"));
    let plan = plan(&f);
    let profile = plan.profile();
    assert_eq!(profile.read_grants(), [p("/h/.config/tool")]);
    let rw = [p("/w/p"), p("/state/sessions/s1/claude"), p("/w/main")];
    assert_eq!(profile.read_write_grants(), rw);
    assert_eq!(plan.bwrap.shared, rw);
    assert_eq!(
        plan.bwrap.holder(Path::new("/w/main/.git/config")),
        Some(Path::new("/w/main"))
    );
    assert_eq!(plan.bwrap.holder(Path::new("/h/.config/tool/x")), None);
}

/// The write-deny list applies in the home folder, the project and each other read-write
/// grant once, never inside the relay's own folders.
#[test]
fn write_deny_folders_skip_own_folders() {
    let plan = plan(&facts());
    let want = vec![(p("/h"), Role::Home), (p("/w/p"), Role::Project)];
    assert_eq!(plan.write_deny.folders, want);
    assert_eq!(plan.write_deny.extra, [(p("/w/p/extra"), false)]);
}

/// An own folder a grant shows is masked; one no grant shows, or missing, is not; a grant
/// inside it refuses.
#[test]
fn own_folders_masked_where_shown() {
    let own = |path: &str, exists| OwnFolder {
        path: p(path),
        real: p(path),
        exists,
    };
    let grants = [p("/h")];
    let masks = own_masks(&grants, &[own("/h/.relay", true), own("/etc/relay", true)]);
    assert_eq!(masks.unwrap(), [p("/h/.relay")]);
    assert!(own_masks(&grants, &[own("/h/.relay", false)])
        .unwrap()
        .is_empty());
    let inside = [p("/h"), p("/h/.relay/sessions")];
    let e = own_masks(&inside, &[own("/h/.relay", true)]).unwrap_err();
    assert!(matches!(e, ConfineError::GrantInOwnFolder { .. }), "{e}");
}
