//! A stand-in launch's part (the template's `token_mode: "stand_in"`): the real token moves
//! from the launch into the session's [`StandIn`](crate::net::stand_in::StandIn), which its
//! proxy holds; the launch hands the stand-in on fd 5 instead; the session CA's certificate is
//! written into the session folder, for the sandbox to show read-only.

use super::error::LaunchError;
use super::stage::Prepared;
use crate::net::Intercept;
use crate::settings::{Settings, TokenMode};

/// The CA certificate's file name in the session folder.
#[cfg(target_os = "linux")]
const CA_FILE: &str = "ca.pem";

/// Sets up stand-in mode for `launch` when its template asks for it and it carries the token:
/// the interception its proxy gets. Any other launch: `None`, nothing changed.
#[cfg(target_os = "linux")]
pub(crate) fn begin(
    launch: &mut Prepared,
    settings: &Settings,
) -> Result<Option<Intercept>, LaunchError> {
    use crate::net::stand_in::{api_hosts, StandIn};
    let template = launch.v.template();
    if template.token_mode != TokenMode::StandIn || !launch.carries_token() {
        return Ok(None);
    }
    let hosts = api_hosts(template);
    let Some(real) = launch.token.take() else {
        return Ok(None);
    };
    let what = "stand-in mode";
    let (stand_in, handed) = StandIn::new(real, &hosts, settings.upstream_ca_file.as_deref())
        .map_err(|e| super::error::spawn_err(what)(std::io::Error::other(e)))?;
    launch.token.hand_instead(handed);
    let file = launch.folder.dir().join(CA_FILE);
    write_ca(&file, stand_in.ca_pem())
        .map_err(super::error::spawn_err(format_args!("{}", file.display())))?;
    launch.ca_file = Some(file);
    Ok(Some(stand_in))
}

/// No stand-in mode on this system: the settings refuse the setting, so nothing to set up.
#[cfg(not(target_os = "linux"))]
pub(crate) fn begin(
    launch: &mut Prepared,
    _settings: &Settings,
) -> Result<Option<Intercept>, LaunchError> {
    let _ = (
        launch.v.template().token_mode == TokenMode::StandIn,
        &launch.ca_file,
    );
    Ok(None)
}

/// Writes the certificate afresh (a kept session's folder may hold an earlier one), `0644`:
/// a certificate is no secret.
#[cfg(target_os = "linux")]
fn write_ca(file: &std::path::Path, pem: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(file)?;
    f.write_all(pem.as_bytes())
}
