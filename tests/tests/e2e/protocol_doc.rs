//! DESIGN.md's host–shim protocol tables say what the code does: every flag of the shim's
//! synopsis has a row and every row is a flag the shim parses; every status line the shim can
//! write has a row, and every row, its placeholders filled in, is a line the host reads back as
//! the event of that name. The same for the host–`relay-stand-in` protocol
//! (`relay_host::stand_in::protocol`): its synopsis, its descriptors and every report line.

use std::path::Path;

use relay_shim::identity::{Refusal, SecretError};
use relay_shim::{ShimOptions, StatusEvent, USAGE};

/// The first cell of each row of the table whose header starts with `| {first} |`.
fn first_cells(doc: &str, first: &str) -> Vec<String> {
    let header = format!("| {first} |");
    doc.lines()
        .skip_while(|l| !l.starts_with(&header))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            row.split('|')
                .nth(1)
                .unwrap()
                .trim()
                .trim_matches('`')
                .to_owned()
        })
        .collect()
}

fn design() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/DESIGN.md");
    std::fs::read_to_string(p).expect("docs/DESIGN.md")
}

/// The options of the synopsis, each with its value's name (`--status-fd N`).
fn synopsis_flags() -> Vec<String> {
    let opts = USAGE.split(" -- ").next().unwrap();
    opts.split('[')
        .skip(1)
        .map(|o| o.split(']').next().unwrap().trim().to_owned())
        .collect()
}

#[test]
fn the_flag_table_is_the_shims_synopsis() {
    let table = first_cells(&design(), "flag");
    assert_eq!(
        table,
        synopsis_flags(),
        "DESIGN.md's flag table against USAGE"
    );
    // Each row is a flag the shim parses (its value filled in where it takes one).
    for flag in &table {
        let mut args: Vec<String> = flag.split(' ').map(String::from).collect();
        if args.len() == 2 {
            args[1] = match args[0].as_str() {
                "--sandbox-profile" => "/p".into(),
                "--pass-fds" => "10-12".into(),
                "--session-id" => "s1".into(),
                "--cleanup" => "/state/sessions/s1".into(),
                "--keep-env" => "ANTHROPIC_AUTH_TOKEN".into(),
                _ => "7".into(),
            };
        }
        if flag == "--identity" {
            args.extend(["--session-id".into(), "s1".into()]);
        }
        if flag.starts_with("--keep-env") {
            args.push("--pass-token".into());
        }
        args.extend(["--".into(), "true".into()]);
        match ShimOptions::parse(&args) {
            Ok(o) => assert_eq!(ShimOptions::parse(o.to_args()), Ok(o)),
            // A flag of the other platform is still a flag the shim knows.
            Err(e) => assert!(
                flag.starts_with("--sandbox-profile") && cfg!(not(target_os = "macos")),
                "{flag}: {e}"
            ),
        }
    }
}

#[test]
fn the_status_table_is_every_line_the_host_reads() {
    let table = first_cells(&design(), "line");
    let names: Vec<&str> = table
        .iter()
        .map(|l| {
            let fill = l
                .replace(":P", ":7")
                .replace(":E", ":2")
                .replace(":S", ":3")
                .replace(":G", ":9")
                .replace(
                    ":R",
                    &format!(
                        ":\"{}\"",
                        if l.contains("bad_secret") {
                            SecretError::REASONS[0]
                        } else {
                            Refusal::REASONS[0]
                        }
                    ),
                );
            let e = StatusEvent::parse(&fill).unwrap_or_else(|e| panic!("{l}: {e}"));
            assert_eq!(StatusEvent::parse(&e.line()), Ok(e));
            e.name()
        })
        .collect();
    for every in [
        StatusEvent::NoIdentity,
        StatusEvent::HelloOk { pid: 1 },
        StatusEvent::BadSecret { reason: "length" },
        StatusEvent::HelloRefused { reason: "timeout" },
        StatusEvent::Started { pid: 1 },
        StatusEvent::SpawnFailed { errno: 2 },
        StatusEvent::SandboxFailed { status: 1 },
        StatusEvent::Exited { status: 0 },
        StatusEvent::Signaled { signal: 9 },
    ] {
        assert!(
            names.contains(&every.name()),
            "DESIGN.md has no row for {}",
            every.line().trim_end()
        );
    }
    assert_eq!(names.len(), 9, "{table:?}");
}

/// DESIGN.md's stand-in protocol tables say what `relay_host::stand_in::protocol` does: the
/// synopsis is the program's, the descriptor rows are its constants in order, and every report
/// the program can write has a row, each row (its placeholders filled in) a line the host reads
/// back as that report.
#[cfg(target_os = "linux")]
mod stand_in {
    use relay_host::stand_in::protocol::{
        Args, Report, CA_FD, REPORT_FD, SYSTEM_CA_FD, TOKEN_FD, USAGE,
    };

    use super::{design, first_cells};

    #[test]
    fn the_stand_in_synopsis_and_descriptors_are_the_protocols() {
        let doc = design();
        assert!(
            doc.contains(&format!("\n`{USAGE}`\n")),
            "DESIGN.md's synopsis is not {USAGE}"
        );
        let fds: Vec<i32> = first_cells(&doc, "stand-in fd")
            .iter()
            .map(|c| c.parse().unwrap_or_else(|e| panic!("{c}: {e}")))
            .collect();
        assert_eq!(fds, [TOKEN_FD, REPORT_FD, CA_FD, SYSTEM_CA_FD]);
        // The synopsis's parts are what `Args` writes and reads back.
        let a = Args {
            socket: "/s/proxy.sock".into(),
            api: vec!["api.anthropic.com:443".into()],
            allow: vec!["example.com".into()],
        };
        let words: Vec<String> = (a.to_args().into_iter())
            .map(|w| w.into_string().unwrap())
            .collect();
        assert_eq!(
            words,
            [
                "/s/proxy.sock",
                "--api",
                "api.anthropic.com:443",
                "--",
                "example.com"
            ]
        );
        assert_eq!(Args::parse(a.to_args()), Ok(a));
    }

    /// One report of each kind. A new kind does not compile here until it is added (the match
    /// has no `_` arm), and then needs its row in DESIGN.md.
    fn one_of_each() -> Vec<Report> {
        let host = || "api.anthropic.com".to_string();
        let every = vec![
            Report::Ready {
                stand_in: "sk-ant-oat01-x".into(),
                ca: "PEM".into(),
            },
            Report::Error("e".into()),
            Report::Denied {
                host: host(),
                port: 80,
                reason: "not on the allow-list".into(),
                allow_with: "a".into(),
            },
            Report::Refused {
                host: host(),
                port: 443,
                status: 502,
                reason: "r".into(),
            },
            Report::Used {
                host: host(),
                port: 443,
                status: 200,
                sent: 1,
                received: 2,
            },
        ];
        for r in &every {
            match r {
                Report::Ready { .. }
                | Report::Error(_)
                | Report::Denied { .. }
                | Report::Refused { .. }
                | Report::Used { .. } => {}
            }
        }
        every
    }

    #[test]
    fn the_report_table_is_every_line_the_host_reads() {
        let table = first_cells(&design(), "report");
        let names: Vec<&str> = table
            .iter()
            .map(|l| {
                let fill = [
                    (":T", ":\"sk-ant-oat01-x\""),
                    (":C", ":\"PEM\""),
                    (":M", ":\"m\""),
                    (":H", ":\"h\""),
                    (":R", ":\"r\""),
                    (":A", ":\"a\""),
                    (":P", ":443"),
                    (":S", ":200"),
                    (":N", ":1"),
                ]
                .iter()
                .fold(l.clone(), |l, (from, to)| l.replace(from, to));
                let r = Report::parse(&fill).unwrap_or_else(|e| panic!("{l}: {e}"));
                assert_eq!(Report::parse(&r.line()).unwrap(), r);
                r.name()
            })
            .collect();
        for every in one_of_each() {
            assert!(
                names.contains(&every.name()),
                "DESIGN.md has no row for {}",
                every.name()
            );
        }
        assert_eq!(names.len(), one_of_each().len(), "{table:?}");
    }
}
