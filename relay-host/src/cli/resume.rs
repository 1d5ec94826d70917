//! After a Claude session of `run`: how to resume its conversation through relay. Claude Code
//! prints `claude --setting-sources user --resume <id>` as it exits, which would run Claude
//! outside the sandbox, without the token; relay says the command that resumes it inside.

use std::path::Path;
use std::time::SystemTime;

use crate::Host;

/// The conversation written during this session: the newest `<id>.jsonl` under the relay-owned
/// Claude config folder's `projects/` modified since `started` (Claude Code keeps one file per
/// conversation there), by its id.
pub(crate) fn latest_conversation(claude_config: &Path, started: SystemTime) -> Option<String> {
    let projects = std::fs::read_dir(claude_config.join("projects")).ok()?;
    projects
        .flatten()
        .filter_map(|p| std::fs::read_dir(p.path()).ok())
        .flat_map(|files| files.flatten())
        .filter_map(|f| {
            let path = f.path();
            let modified = f.metadata().ok()?.modified().ok()?;
            let id = path.file_stem()?.to_str()?.to_string();
            let ok = path.extension().is_some_and(|x| x == "jsonl")
                && modified >= started
                && crate::launch::plan::request::valid_session_id(&id);
            ok.then_some((modified, id))
        })
        .max()
        .map(|(_, id)| id)
}

/// Says on stderr, to a person, how to resume the conversation this session wrote, through
/// relay (sandboxed, with the token read afresh), in place of Claude's own exit line.
pub(crate) fn say_how_to_resume(host: &Host, project: Option<&Path>, started: SystemTime) {
    if !crate::human::for_person() {
        return;
    }
    let claude_config = host.state_dir.join(crate::state::CLAUDE_CONFIG_DIR);
    let Some(id) = latest_conversation(&claude_config, started) else {
        return;
    };
    let project = project.map_or(String::new(), |p| {
        format!(
            " --project {}",
            crate::human::sh_quote(&p.display().to_string())
        )
    });
    errln!(
        "relay-host: to resume this conversation in the sandbox, logged in: relay-host run{project} \
         --resume {id} (or --continue for the project's latest). Claude's own `claude ... --resume` \
         line runs Claude outside the sandbox, without the token."
    );
}

#[cfg(test)]
mod tests {
    /// `latest_conversation`'s example.
    #[test]
    fn latest_conversation_doc_example() {
        let result = (|| {
            let dir = tempfile::tempdir()?;
            let before = std::time::SystemTime::now() - std::time::Duration::from_secs(5);
            std::fs::create_dir_all(dir.path().join("projects/-p"))?;
            std::fs::write(dir.path().join("projects/-p/0b5e.jsonl"), "{}\n")?;
            assert_eq!(
                crate::cli::resume::latest_conversation(dir.path(), before).as_deref(),
                Some("0b5e")
            );
            Ok::<(), std::io::Error>(())
        })();
        result.unwrap();
    }
}
