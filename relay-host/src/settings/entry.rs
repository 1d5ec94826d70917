//! A settings file's template entry and how it extends a built-in template.
//!
//! An entry whose id is not a built-in one is a whole template (`command` required). An entry
//! with a built-in id (`claude-code`, `shell`) changes only the fields it gives:
//!
//! | field | rule |
//! |---|---|
//! | `command` | replaces |
//! | `env` | merges by name: the entry's value wins, the built-in's other variables stay |
//! | `sandbox` | replaces (grants, or `false`) |
//! | `request_env` | adds |
//! | `network` | an allow-list's entries add to the built-in allow-list; `"host"` or `"none"` replaces |
//! | `api_base_url`, `same_project`, `trust_project`, `token_mode`, `writes_home` | replace |

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer};

use super::template::{SameProject, Sandbox, Template};
use super::token_mode::TokenMode;
use crate::net::{AllowEntry, AllowError, Network};

/// One `templates` entry as written: every field but `id` may be left out.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    command: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    sandbox: Option<Sandbox>,
    request_env: Option<Vec<String>>,
    network: Option<Network>,
    api_base_url: Option<crate::net::Gateway>,
    same_project: Option<SameProject>,
    trust_project: Option<bool>,
    token_mode: Option<TokenMode>,
    writes_home: Option<bool>,
}

/// `templates` of a settings file, each entry resolved ([`resolve`]) where it is read, so an
/// error carries its place (`templates[1]`).
pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Template>, D::Error> {
    struct Resolved(Template);
    impl<'de> Deserialize<'de> for Resolved {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Resolved, D::Error> {
            let entry = Entry::deserialize(d)?;
            resolve(entry)
                .map(Resolved)
                .map_err(serde::de::Error::custom)
        }
    }
    Ok(Vec::<Resolved>::deserialize(d)?
        .into_iter()
        .map(|r| r.0)
        .collect())
}

/// Why an entry does not resolve to a template.
#[derive(Debug)]
enum EntryError {
    /// An entry whose id is not a built-in one gives no `command`.
    NoCommand {
        /// The entry's id.
        id: String,
    },
    /// An allow-list entry added to a built-in allow-list does not parse.
    Allow(AllowError),
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryError::NoCommand { id } => write!(
                f,
                "template {id:?}: command is missing (only a built-in template's id, \
                 claude-code or shell, may leave it out)"
            ),
            EntryError::Allow(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for EntryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EntryError::NoCommand { .. } => None,
            EntryError::Allow(e) => Some(e),
        }
    }
}

/// The effective template of an entry: the built-in one of its id extended by it, else the
/// entry alone (which must give `command`).
fn resolve(e: Entry) -> Result<Template, EntryError> {
    // Every field named on both sides: a field added to either is a compile error here until
    // its rule is decided.
    let Entry {
        id,
        command,
        env,
        sandbox,
        request_env,
        network,
        api_base_url,
        same_project,
        trust_project,
        token_mode,
        writes_home,
    } = e;
    let Some(base) = super::template::builtins().iter().find(|b| b.id == id) else {
        let Some(command) = command else {
            return Err(EntryError::NoCommand { id });
        };
        return Ok(Template {
            id,
            command,
            env: env.unwrap_or_default(),
            sandbox: sandbox.unwrap_or_default(),
            request_env: request_env.unwrap_or_default(),
            network,
            api_base_url,
            same_project,
            trust_project,
            token_mode: token_mode.unwrap_or_default(),
            writes_home,
        });
    };
    let Template {
        id: _,
        command: base_command,
        env: base_env,
        sandbox: base_sandbox,
        request_env: base_request_env,
        network: base_network,
        api_base_url: base_api_base_url,
        same_project: base_same_project,
        trust_project: base_trust_project,
        token_mode: base_token_mode,
        writes_home: base_writes_home,
    } = base.clone();
    let mut merged_env = base_env;
    merged_env.extend(env.unwrap_or_default());
    let mut merged_request_env = base_request_env;
    for name in request_env.unwrap_or_default() {
        if !merged_request_env.contains(&name) {
            merged_request_env.push(name);
        }
    }
    Ok(Template {
        id,
        command: command.unwrap_or(base_command),
        env: merged_env,
        sandbox: sandbox.unwrap_or(base_sandbox),
        request_env: merged_request_env,
        network: merged_network(base_network, network)?,
        api_base_url: api_base_url.or(base_api_base_url),
        same_project: same_project.or(base_same_project),
        trust_project: trust_project.or(base_trust_project),
        token_mode: token_mode.unwrap_or(base_token_mode),
        writes_home: writes_home.or(base_writes_home),
    })
}

/// A built-in template's `network` as an entry extends it: an allow-list's entries add to the
/// built-in allow-list; `"host"` or `"none"` (or an allow-list over another kind) replaces.
fn merged_network(
    base: Option<Network>,
    given: Option<Network>,
) -> Result<Option<Network>, EntryError> {
    Ok(match (base, given) {
        (Some(Network::Allow(base)), Some(Network::Allow(more))) => {
            let mut list = base;
            for written in more.entries() {
                let entry = AllowEntry::parse(written).map_err(EntryError::Allow)?;
                list = list.including(&entry);
            }
            Some(Network::Allow(list))
        }
        (base, None) => base,
        (_, given @ Some(Network::Host | Network::None))
        | (None | Some(Network::Host | Network::None), given @ Some(Network::Allow(_))) => given,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Template {
        let e: Entry = serde_json::from_str(text).unwrap();
        resolve(e).unwrap()
    }

    #[test]
    fn an_entry_with_a_builtin_id_changes_only_what_it_gives() {
        let builtin = crate::settings::builtin_templates().remove(0);
        let t = one(r#"{"id": "claude-code", "network": {"allow": ["example.com"]}}"#);
        assert_eq!(t.command, builtin.command);
        assert_eq!(t.env, builtin.env);
        assert_eq!(t.sandbox, builtin.sandbox);
        let Some(Network::Allow(list)) = &t.network else {
            panic!("an allow-list")
        };
        assert_eq!(list.entries(), ["api.anthropic.com", "example.com"]);
        let t = one(r#"{"id": "claude-code", "env": {"A": "1", "DISABLE_TELEMETRY": "0"}}"#);
        assert_eq!(t.env["A"], "1");
        assert_eq!(t.env["DISABLE_TELEMETRY"], "0");
        assert_eq!(t.env["CLAUDE_CONFIG_DIR"], "{claude_config}");
        let t = one(r#"{"id": "shell", "command": ["/bin/bash"], "sandbox": false}"#);
        assert_eq!(
            (t.command, t.sandbox),
            (vec!["/bin/bash".into()], Sandbox::Off)
        );
        let t = one(r#"{"id": "claude-code", "network": "none"}"#);
        assert_eq!(t.network, Some(Network::None));
    }

    #[test]
    fn another_id_needs_a_command() {
        let e: Entry = serde_json::from_str(r#"{"id": "pi"}"#).unwrap();
        let e = resolve(e).unwrap_err();
        assert_eq!(
            e.to_string(),
            "template \"pi\": command is missing (only a built-in template's id, claude-code \
             or shell, may leave it out)"
        );
    }
}
