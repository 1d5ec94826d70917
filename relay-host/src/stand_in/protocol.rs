//! The one protocol between relay-host and its `relay-stand-in`, both sides reading and writing
//! these types: the command line ([`Args`]), the descriptors the program is handed
//! ([`TOKEN_FD`], [`REPORT_FD`], [`CA_FD`], [`SYSTEM_CA_FD`]) and the report lines it writes on
//! fd 4 ([`Report`]). docs/DESIGN.md ("Stand-in mode: the program's protocol") has a table of
//! each, which `tests/tests/e2e/protocol_doc.rs` checks against this module.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The descriptor the real token arrives on (read to its end, then closed).
pub const TOKEN_FD: i32 = 3;

/// The descriptor the program reports on: one [`Report`] a line.
pub const REPORT_FD: i32 = 4;

/// The descriptor the extra upstream CA certificates arrive on (`upstream_ca_file`'s bytes).
pub const CA_FD: i32 = 5;

/// The descriptor the system trust store's bundle arrives on.
pub const SYSTEM_CA_FD: i32 = 6;

/// The program's synopsis.
///
/// ```
/// assert!(relay_host::stand_in::protocol::USAGE.starts_with("relay-stand-in SOCKET"));
/// ```
pub const USAGE: &str = "relay-stand-in SOCKET [--api HOST:PORT]... -- [ENTRY]...";

/// `relay-stand-in`'s command line: the socket its allow-list proxy listens at, the API hosts
/// whose `CONNECT`s it intercepts, and the allow-list's entries.
///
/// ```
/// use relay_host::stand_in::protocol::Args;
/// let a = Args {
///     socket: "/state/sessions/s1/proxy.sock".into(),
///     api: vec!["api.anthropic.com:443".into()],
///     allow: vec!["example.com".into()],
/// };
/// assert_eq!(Args::parse(a.to_args()), Ok(a));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// Where the proxy listens.
    pub socket: PathBuf,
    /// The API hosts (`host:port`), each after `--api`.
    pub api: Vec<String>,
    /// The allow-list's entries, after `--`.
    pub allow: Vec<String>,
}

/// A command line that is not [`USAGE`]'s.
///
/// ```
/// use relay_host::stand_in::protocol::{Args, UsageError};
/// assert_eq!(Args::parse(vec!["/s".into(), "--nope".into()]), Err(UsageError));
/// assert_eq!(UsageError.to_string(), format!("usage: {}", relay_host::stand_in::protocol::USAGE));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageError;

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "usage: {USAGE}")
    }
}

impl std::error::Error for UsageError {}

impl Args {
    /// Reads the command line (without the program's name).
    pub fn parse(args: Vec<OsString>) -> Result<Args, UsageError> {
        let mut it = args.into_iter();
        let socket = PathBuf::from(it.next().ok_or(UsageError)?);
        let (mut api, mut allow) = (Vec::new(), Vec::new());
        let text = |v: Option<OsString>| v.and_then(|s| s.into_string().ok()).ok_or(UsageError);
        loop {
            match it.next().and_then(|a| a.into_string().ok()).as_deref() {
                Some("--api") => api.push(text(it.next())?),
                Some("--") => break,
                _ => return Err(UsageError),
            }
        }
        for entry in it {
            allow.push(text(Some(entry))?);
        }
        Ok(Args { socket, api, allow })
    }

    /// The command line that [`Args::parse`] reads back as `self`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out = vec![self.socket.clone().into_os_string()];
        for h in &self.api {
            out.extend(["--api".into(), h.into()]);
        }
        out.push("--".into());
        out.extend(self.allow.iter().map(OsString::from));
        out
    }
}

/// One line `relay-stand-in` writes on [`REPORT_FD`] (a JSON object, one `write` each), never a
/// byte of the real token: `ready` or `error` first, then, while it runs, one line for each
/// refusal and each answer of an API host.
///
/// ```
/// use relay_host::stand_in::protocol::Report;
/// let r = Report::Used { host: "api.anthropic.com".into(), port: 443, status: 200, sent: 10, received: 20 };
/// let line = r.line();
/// assert_eq!(line, "{\"used\":{\"host\":\"api.anthropic.com\",\"port\":443,\"status\":200,\"sent\":10,\"received\":20}}\n");
/// assert_eq!(Report::parse(&line).unwrap(), r);
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Report {
    /// The allow-list proxy listens: the stand-in (for fd 5 of the session) and the session
    /// CA's certificate (PEM).
    Ready {
        /// The stand-in token.
        stand_in: String,
        /// The session CA's certificate.
        ca: String,
    },
    /// It cannot start (and exits 78): why.
    Error(String),
    /// The allow-list refused a destination (the host's `network_denied` event).
    Denied {
        /// The destination's host.
        host: String,
        /// Its port.
        port: u16,
        /// Why, in words.
        reason: String,
        /// The setting that would allow it.
        allow_with: String,
    },
    /// A request on an intercepted connection was refused (the `stand_in_refused` event).
    Refused {
        /// The API host.
        host: String,
        /// Its port.
        port: u16,
        /// The status the session got (`0`: its TLS handshake failed).
        status: u16,
        /// Why, in words.
        reason: String,
    },
    /// An API host answered a request: counts only (the `stand_in_use` event's sums).
    Used {
        /// The API host.
        host: String,
        /// Its port.
        port: u16,
        /// The answer's status.
        status: u16,
        /// The request's bytes sent on.
        sent: u64,
        /// The answer's bytes sent back.
        received: u64,
    },
}

/// A line that is no [`Report`].
///
/// ```
/// let e = relay_host::stand_in::protocol::Report::parse("{\"hello\":1}").unwrap_err();
/// assert!(e.to_string().starts_with("not a stand-in report: "), "{e}");
/// ```
#[derive(Debug)]
pub struct ReportError(serde_json::Error);

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a stand-in report: {}", self.0)
    }
}

impl std::error::Error for ReportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl Report {
    /// The line as written: JSON and a newline.
    pub fn line(&self) -> String {
        // A map of strings and numbers always serialises.
        let mut line = serde_json::to_string(self).unwrap_or_default();
        line.push('\n');
        line
    }

    /// Reads one line (its newline optional).
    pub fn parse(line: &str) -> Result<Report, ReportError> {
        serde_json::from_str(line.trim_end_matches('\n')).map_err(ReportError)
    }

    /// The report's name: its JSON key.
    ///
    /// ```
    /// use relay_host::stand_in::protocol::Report;
    /// assert_eq!(Report::Error("no".into()).name(), "error");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Report::Ready { .. } => "ready",
            Report::Error(_) => "error",
            Report::Denied { .. } => "denied",
            Report::Refused { .. } => "refused",
            Report::Used { .. } => "used",
        }
    }
}

/// The stand-in is shown as `..`: a report may be logged.
impl fmt::Debug for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Report::Ready { ca, .. } => (f.debug_struct("Ready"))
                .field("stand_in", &"..")
                .field("ca", ca)
                .finish(),
            Report::Error(e) => f.debug_tuple("Error").field(e).finish(),
            Report::Denied {
                host,
                port,
                reason,
                allow_with,
            } => (f.debug_struct("Denied"))
                .field("host", host)
                .field("port", port)
                .field("reason", reason)
                .field("allow_with", allow_with)
                .finish(),
            Report::Refused {
                host,
                port,
                status,
                reason,
            } => (f.debug_struct("Refused"))
                .field("host", host)
                .field("port", port)
                .field("status", status)
                .field("reason", reason)
                .finish(),
            Report::Used {
                host,
                port,
                status,
                sent,
                received,
            } => (f.debug_struct("Used"))
                .field("host", host)
                .field("port", port)
                .field("status", status)
                .field("sent", sent)
                .field("received", received)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_report_is_the_line_it_was_before_the_types() {
        let ready = Report::Ready {
            stand_in: "sk-ant-oat01-x".into(),
            ca: "PEM".into(),
        };
        assert_eq!(
            ready.line(),
            "{\"ready\":{\"stand_in\":\"sk-ant-oat01-x\",\"ca\":\"PEM\"}}\n"
        );
        assert_eq!(
            format!("{ready:?}"),
            "Ready { stand_in: \"..\", ca: \"PEM\" }"
        );
        assert_eq!(Report::Error("e".into()).line(), "{\"error\":\"e\"}\n");
        let denied = Report::Denied {
            host: "h".into(),
            port: 80,
            reason: "r".into(),
            allow_with: "a".into(),
        };
        let want =
            "{\"denied\":{\"host\":\"h\",\"port\":80,\"reason\":\"r\",\"allow_with\":\"a\"}}";
        assert_eq!(denied.line().trim_end(), want);
        let refused = Report::Refused {
            host: "h".into(),
            port: 443,
            status: 502,
            reason: "r".into(),
        };
        let want = "{\"refused\":{\"host\":\"h\",\"port\":443,\"status\":502,\"reason\":\"r\"}}";
        assert_eq!(refused.line().trim_end(), want);
        for r in [ready, denied, refused] {
            assert_eq!(Report::parse(&r.line()).unwrap(), r);
        }
    }

    #[test]
    fn a_line_with_a_wrong_field_is_no_report() {
        for bad in [
            "",
            "{}",
            "{\"denied\":{\"host\":\"h\",\"port\":\"80\",\"reason\":\"r\",\"allow_with\":\"a\"}}",
            "{\"denied\":{\"host\":\"h\",\"port\":80,\"reason\":\"r\"}}",
            "{\"used\":{\"host\":\"h\",\"port\":443,\"status\":200,\"sent\":1,\"received\":2,\"x\":1}}",
            "{\"ready\":{\"stand_in\":\"s\",\"ca\":\"c\"},\"error\":\"e\"}",
        ] {
            assert!(Report::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_command_line_other_than_the_synopsis_is_refused() {
        let v = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(Args::parse(v(&[])), Err(UsageError));
        assert_eq!(Args::parse(v(&["/s"])), Err(UsageError));
        assert_eq!(Args::parse(v(&["/s", "--api"])), Err(UsageError));
        let a = Args::parse(v(&["/s", "--api", "a:1", "--", "x", "--api"])).unwrap();
        assert_eq!(
            (a.api, a.allow),
            (
                vec!["a:1".into()],
                v(&["x", "--api"])
                    .into_iter()
                    .map(|s| s.into_string().unwrap())
                    .collect::<Vec<String>>()
            )
        );
    }
}
