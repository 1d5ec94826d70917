//! `relay-host templates`: the effective templates (the built-in ones as the settings extend
//! them, then the settings' own) in the settings' own format, to copy from.

use serde::Serialize;

use crate::human::print_error;
use crate::settings::{builtin_templates, Settings, Template};
use crate::Host;
use relay_shim::exit::ExitCode;

/// The format `templates` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Format {
    /// `settings.json`'s.
    Json,
    /// `settings.toml`'s.
    Toml,
}

#[derive(Serialize)]
struct Templates<'a> {
    templates: &'a [Template],
}

/// `templates` as a settings file of `format` would hold them (JSON pretty-printed, with a final
/// newline).
pub(crate) fn render(templates: &[Template], format: Format) -> String {
    let t = Templates { templates };
    match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&t).expect("templates serialize");
            s.push('\n');
            s
        }
        Format::Toml => toml::to_string(&t).expect("templates serialize"),
    }
}

/// The built-in templates as JSON settings (docs/relay-host.md's "Built-in templates" block).
///
/// ```
/// assert!(relay_host::cli::templates_cmd::builtins_json().contains("\"id\": \"shell\""));
/// ```
pub fn builtins_json() -> String {
    render(&builtin_templates(), Format::Json)
}

/// `relay-host templates [--json|--toml]`: the effective templates of the settings, in the
/// format asked for, else the settings file's (JSON when there is none). Exit 0; when the
/// settings do not load, the built-in templates alone (in the format asked for, else that of
/// the settings file there), the settings error on stderr saying so, and its exit code.
pub(crate) fn print(host: &Host, format: Option<Format>) -> i32 {
    let (templates, file, failed) = match Settings::load_with_path(&host.config_dir) {
        Ok((settings, file)) => (settings.all_templates(), file, None),
        Err(e) => {
            let toml = host.config_dir.join("settings.toml");
            let file =
                (toml.exists() && !host.config_dir.join("settings.json").exists()).then_some(toml);
            (builtin_templates(), file, Some(e))
        }
    };
    let toml_file = file.is_some_and(|f| f.extension().is_some_and(|x| x == "toml"));
    let format = format.unwrap_or(if toml_file {
        Format::Toml
    } else {
        Format::Json
    });
    let _ = crate::human::write_out(format_args!("{}", render(&templates, format)));
    match failed {
        None => 0,
        Some(e) => {
            print_error(&format!(
                "{e} (the settings do not load: these are the built-in templates alone)"
            ));
            ExitCode::Unavailable.code()
        }
    }
}

#[cfg(test)]
mod tests {
    /// `Format`'s example.
    #[test]
    fn format_doc_example() {
        assert_ne!(
            crate::cli::templates_cmd::Format::Json,
            crate::cli::templates_cmd::Format::Toml
        );
    }

    /// `render`'s example.
    #[test]
    fn render_doc_example() {
        use crate::cli::templates_cmd::{render, Format};
        let text = render(&crate::settings::builtin_templates(), Format::Toml);
        assert!(text.starts_with("[[templates]]\nid = \"claude-code\""));
    }
}
