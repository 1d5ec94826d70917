//! The plan of one launch: the request checked against the settings ([`Validated`]) with its
//! project checked against the folder rules and the template's grants, once. Every later step
//! reads it; none changes it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::launch::plan::claude_args;
use crate::launch::plan::error::{PlanError, RequestError};
use crate::launch::plan::request::{InvalidSpec, Kind, Validated, NEVER_ENV_PREFIXES};
use crate::net::Network;
use crate::settings::Template;
use crate::Host;

/// A request resolved against the settings and the host: everything the later steps of a
/// launch read, and nothing of the request's own words (the audit row keeps those). Whole once
/// made ([`LaunchPlan::resolve`]): its project is the real path, checked once.
#[derive(Debug, Clone)]
pub(crate) struct LaunchPlan {
    /// The request checked against the settings, as it was made.
    v: Validated,
    /// The project's real path (the request's, checked).
    project: Option<PathBuf>,
    /// The transcripts it resumes ([`LaunchPlan::resumes`]), read once.
    resumes: Option<Option<String>>,
    /// The template's network, its gateway's entry added ([`Template::network`]), made once.
    network: Network,
}

impl LaunchPlan {
    /// The plan of a validated request: its project (if any) must pass the folder rules
    /// ([`crate::launch::plan::project::check_project`]: a folder of the host's user, neither a
    /// system folder nor inside the relay's own) and, in a sandbox, be shown by a grant of the
    /// template; the plan holds its real path.
    pub(crate) fn resolve(
        v: Validated,
        host: &Host,
        claude_config: &Path,
    ) -> Result<Self, PlanError> {
        let project = match v.project.as_deref() {
            None => None,
            Some(given) => Some(real_project(&v, given, host, claude_config)?),
        };
        if v.sandboxed {
            check_writes(&v.template, host, project.as_deref(), claude_config)?;
        }
        Ok(LaunchPlan::with_project(v, project))
    }

    fn with_project(v: Validated, project: Option<PathBuf>) -> LaunchPlan {
        let resumes = resumed(&v);
        let network = v.template.network();
        LaunchPlan {
            v,
            project,
            resumes,
            network,
        }
    }

    /// The plan of a validated request taken as it is, its project unchecked (unit tests).
    #[cfg(test)]
    pub(crate) fn unchecked(v: Validated) -> LaunchPlan {
        let project = v.project.clone();
        LaunchPlan::with_project(v, project)
    }

    /// The kind of session asked for.
    pub(crate) fn kind(&self) -> Kind {
        self.v.kind
    }

    /// The template it resolved to.
    pub(crate) fn template(&self) -> &Template {
        &self.v.template
    }

    /// The network its template reaches (the allow-list with its gateway's entry), decided
    /// once: every step reads it here.
    pub(crate) fn network(&self) -> &Network {
        &self.network
    }

    /// True for a Claude launch (kind `claude`, or `terminal` with `claude-code`).
    pub(crate) fn claude(&self) -> bool {
        self.v.claude
    }

    /// True when it runs in the sandbox (the request asks for it, it runs on this machine, and
    /// the template has one).
    pub(crate) fn sandboxed(&self) -> bool {
        self.v.sandboxed
    }

    /// The session id (given or generated).
    pub(crate) fn session_id(&self) -> &str {
        &self.v.session_id
    }

    /// The project folder's real path.
    pub(crate) fn project(&self) -> Option<&Path> {
        self.project.as_deref()
    }

    /// A Claude conversation to resume.
    pub(crate) fn resume(&self) -> Option<&str> {
        self.v.resume.as_deref()
    }

    /// Continue the project's most recent Claude conversation.
    pub(crate) fn continue_last(&self) -> bool {
        self.v.continue_last
    }

    /// Arguments appended to the template's command.
    pub(crate) fn extra_args(&self) -> &[String] {
        &self.v.extra_args
    }

    /// Variables set after the template's env.
    pub(crate) fn env(&self) -> &BTreeMap<String, String> {
        &self.v.env
    }

    /// The machine an ssh launch runs on (never with the token).
    pub(crate) fn ssh_host(&self) -> Option<&str> {
        self.v.ssh_host.as_deref()
    }

    /// Keep the session folder after the session ends.
    pub(crate) fn keep(&self) -> bool {
        self.v.keep
    }

    /// Checks what the request adds to a launch that carries the token: each `env` name must be
    /// in the template's `request_env` allow-list and outside [`NEVER_ENV_PREFIXES`];
    /// `extra_args` pass [`crate::launch::plan::claude_args::check`]: read with Claude Code's
    /// grammar, each option as classified, no subcommand but `auth status`.
    pub(crate) fn check_token_request(&self) -> Result<(), InvalidSpec> {
        let allowed_env = &self.v.template.request_env;
        for k in self.v.env.keys() {
            if let Some(p) = NEVER_ENV_PREFIXES.iter().find(|p| k.starts_with(*p)) {
                let (name, prefix) = (k.clone(), *p);
                return Err(InvalidSpec::EnvPrefix { name, prefix });
            }
            if !allowed_env.iter().any(|a| a == k) {
                return Err(InvalidSpec::EnvNotAllowed(k.clone()));
            }
        }
        let args = &self.v.extra_args;
        crate::launch::plan::claude_args::check(args).map_err(|(index, rule)| {
            let arg = args[index].clone();
            InvalidSpec::Arg { index, arg, rule }
        })
    }

    /// The transcripts a launch resumes: one conversation (`resume`, `--resume ID`), all of
    /// them (`--continue`, which picks the newest), or none.
    pub(crate) fn resumes(&self) -> Option<Option<&str>> {
        self.resumes.as_ref().map(Option::as_deref)
    }
}

/// Refuses a sandboxed launch whose template would let the session write where the operator's
/// programs or the host run code or read configuration (its `{project}` grant with `project`).
fn check_writes(
    template: &Template,
    host: &Host,
    project: Option<&Path>,
    claude_config: &Path,
) -> Result<(), PlanError> {
    let found = (template.sandbox).refused_write(
        &host.home,
        project,
        claude_config,
        template.writes_home(),
    )?;
    match found {
        None => Ok(()),
        Some((grant, path, why)) => Err(RequestError::WritesWhereCodeRuns {
            template: template.id.clone(),
            grant,
            path,
            why,
        }
        .into()),
    }
}

/// The real path of the project `given`, checked against the folder rules and, for a sandboxed
/// launch, against the template's grants.
fn real_project(
    v: &Validated,
    given: &Path,
    host: &Host,
    claude_config: &Path,
) -> Result<PathBuf, PlanError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let own = [host.config_dir.as_path(), host.state_dir.as_path()];
    let real = crate::launch::plan::project::check_project(given, &own, me)
        .map_err(RequestError::Invalid)?;
    let sandbox = &v.template.sandbox;
    if v.sandboxed && !sandbox.shows(&host.home, &real, claude_config)? {
        let template = v.template.id.clone();
        let project = given.to_path_buf();
        return Err(RequestError::ProjectNotGranted { project, template }.into());
    }
    Ok(real)
}

/// What a request resumes: its `resume` or `continue` (a Claude launch's), else what its
/// `extra_args` resume as Claude Code's grammar reads them ([`claude_args::parse`]); arguments
/// the grammar refuses resume nothing.
fn resumed(v: &Validated) -> Option<Option<String>> {
    if let (true, Some(id)) = (v.claude, &v.resume) {
        return Some(Some(id.clone()));
    }
    if v.claude && v.continue_last {
        return Some(None);
    }
    claude_args::parse(&v.extra_args).ok()?.resumes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::plan::request::Request;
    use crate::settings::Settings;

    /// Settings with one template `t` whose sandbox shows `read` only, and a folder of its own
    /// for the host: config, state and home in a fresh folder.
    fn world(read: &str) -> (tempfile::TempDir, Settings, Host) {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings::default();
        let t =
            format!(r#"{{"id": "t", "command": ["/bin/sh"], "sandbox": {{"read": ["{read}"]}}}}"#);
        settings.templates.push(serde_json::from_str(&t).unwrap());
        let host = Host {
            config_dir: dir.path().join("config"),
            state_dir: dir.path().join("state"),
            home: dir.path().join("home"),
        };
        (dir, settings, host)
    }

    fn resolve(settings: &Settings, host: &Host, json: &str) -> Result<LaunchPlan, PlanError> {
        let v = Request::from_json(json)
            .unwrap()
            .validate(settings)
            .unwrap();
        LaunchPlan::resolve(v, host, Path::new("/nonexistent/claude"))
    }

    /// The plan holds the project's real path, decided once: a link to a granted folder is
    /// the folder itself.
    #[test]
    fn a_plan_holds_the_projects_real_path() {
        let (dir, _, host) = world("/");
        let real = dir.path().join("work");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let (_, settings, _) = world(&dir.path().display().to_string());
        let json = format!(
            r#"{{"kind": "terminal", "template": "t", "project": "{}"}}"#,
            link.display()
        );
        let p = resolve(&settings, &host, &json).unwrap();
        assert_eq!(p.project(), Some(real.canonicalize().unwrap().as_path()));
    }

    /// A sandboxed launch's project must be shown by a grant (the refusal names the project
    /// as given); an unsandboxed one is not checked against the grants, and a project inside
    /// the relay's own folders is refused either way.
    #[test]
    fn a_project_no_grant_shows_is_refused_in_a_sandbox_only() {
        let (dir, settings, host) = world("/srv/elsewhere");
        let project = dir.path().join("work");
        std::fs::create_dir(&project).unwrap();
        let json = format!(
            r#"{{"kind": "terminal", "template": "t", "project": "{}"}}"#,
            project.display()
        );
        let e = resolve(&settings, &host, &json).unwrap_err();
        let PlanError::Request(RequestError::ProjectNotGranted {
            project: p,
            template,
        }) = e
        else {
            panic!("{e:?}");
        };
        assert_eq!((p.as_path(), template.as_str()), (project.as_path(), "t"));
        let json = json.replace(r#""project""#, r#""sandbox": false, "project""#);
        let plan = resolve(&settings, &host, &json).unwrap();
        assert!(!plan.sandboxed() && plan.project().is_some());
        std::fs::create_dir_all(host.state_dir.join("inside")).unwrap();
        let own = host.state_dir.join("inside");
        let json = format!(
            r#"{{"kind": "terminal", "template": "t", "sandbox": false, "project": "{}"}}"#,
            own.display()
        );
        let e = resolve(&settings, &host, &json).unwrap_err();
        let PlanError::Request(e @ RequestError::Invalid(_)) = e else {
            panic!("{e:?}");
        };
        assert!(
            e.to_string().contains("lies inside the relay's own folder"),
            "{e}"
        );
    }

    fn plan(json: &str) -> LaunchPlan {
        let v = Request::from_json(json).unwrap();
        LaunchPlan::unchecked(v.validate(&Default::default()).unwrap())
    }

    #[test]
    fn a_plan_reads_what_the_request_resolved_to() {
        let p = plan(r#"{"kind": "terminal", "template": "shell", "session_id": "s1"}"#);
        assert!(!p.claude());
        assert!(p.sandboxed());
        assert_eq!((p.session_id(), p.template().id.as_str()), ("s1", "shell"));
    }

    #[test]
    fn a_token_request_adds_only_what_its_template_allows() {
        let mut p = plan(r#"{"kind": "claude", "env": {"FOO": "1"}}"#);
        let e = p.check_token_request().unwrap_err();
        assert!(
            matches!(e, InvalidSpec::EnvNotAllowed(ref n) if n == "FOO"),
            "{e}"
        );
        p.v.template.request_env.push("FOO".into());
        p.check_token_request().unwrap();
        // A template that allows a never-set prefix does not: it is never a request's.
        let mut p = plan(r#"{"kind": "claude", "env": {"ANTHROPIC_BASE_URL": "http://x"}}"#);
        p.v.template.request_env.push("ANTHROPIC_BASE_URL".into());
        let e = p.check_token_request().unwrap_err();
        assert!(e.to_string().contains("ANTHROPIC_BASE_URL"), "{e}");
        assert!(
            matches!(
                e,
                InvalidSpec::EnvPrefix {
                    prefix: "ANTHROPIC_",
                    ..
                }
            ),
            "{e}"
        );
        let p = plan(r#"{"kind": "claude", "extra_args": ["--settings={}"]}"#);
        let e = p.check_token_request().unwrap_err();
        assert!(e.to_string().contains("--settings"), "{e}");
        let p = plan(r#"{"kind": "claude", "extra_args": ["--model", "opus"]}"#);
        p.check_token_request().unwrap();
    }

    #[test]
    fn a_plan_names_the_conversations_it_resumes() {
        let p = plan(r#"{"kind": "claude", "resume": "abc"}"#);
        assert_eq!(p.resumes(), Some(Some("abc")));
        let p = plan(r#"{"kind": "claude", "continue": true}"#);
        assert_eq!(p.resumes(), Some(None));
        let p = plan(r#"{"kind": "claude", "extra_args": ["--resume=x1"]}"#);
        assert_eq!(p.resumes(), Some(Some("x1")));
        let p = plan(r#"{"kind": "claude", "extra_args": ["-r", "x2"]}"#);
        assert_eq!(p.resumes(), Some(Some("x2")));
        let p = plan(r#"{"kind": "claude", "extra_args": ["-c"]}"#);
        assert_eq!(p.resumes(), Some(None));
        assert_eq!(plan(r#"{"kind": "claude"}"#).resumes(), None);
    }
}
