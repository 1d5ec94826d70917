//! The settings checks stand-in mode needs: a sandboxed template with a network allow-list (the
//! proxy that swaps the token is the allow-list's), Linux, an `https://` gateway when one is
//! named (as `api_base_url`, not as `ANTHROPIC_BASE_URL` in its `env`), no plain gateway a session could stand in for, and a readable `upstream_ca_file`.

use std::path::Path;

use super::template::Template;
use crate::net::network_rules;

/// The first problem of the settings' token modes, or `None`: a template whose stand-in mode
/// cannot work ([`stand_in_problem`]), a plain gateway that could be impersonated
/// ([`gateway_problem`]), an unusable `upstream_ca_file` ([`ca_file_problem`]).
pub(super) fn problem(
    entries: &[Template],
    all: &[Template],
    upstream_ca_file: Option<&Path>,
) -> Option<String> {
    (entries.iter().find_map(stand_in_problem))
        .or_else(|| gateway_problem(all))
        .or_else(|| ca_file_problem(upstream_ca_file))
}

/// Why a template's `token_mode: "stand_in"` cannot work, or `None`.
fn stand_in_problem(t: &Template) -> Option<String> {
    if !t.token_mode.hands_stand_in() {
        return None;
    }
    let id = &t.id;
    if !cfg!(target_os = "linux") {
        return Some(format!(
            "template {id:?}: token_mode \"stand_in\" needs the network allow-list's proxy, which \
             runs on Linux only; on this system use token_mode \"pipe\" (or leave it out)"
        ));
    }
    if t.sandbox.grants().is_none() || network_rules(&t.network()).proxied.is_none() {
        return Some(format!(
            "template {id:?}: token_mode \"stand_in\" needs a sandboxed template with a network \
             allow-list (\"network\": {{\"allow\": [...]}}): its proxy is what adds the real \
             token; or give the template \"token_mode\": \"pipe\" (the real token on fd 5)"
        ));
    }
    if t.env.contains_key(super::template::BASE_URL_VARIABLE) {
        return Some(format!(
            "template {id:?}: its env sets {var}, so in stand-in mode the gateway would \
             receive the stand-in, not the token: name the gateway as the template's \
             \"api_base_url\" (its proxy then puts the token in for it), or give the template \
             \"token_mode\": \"pipe\" (the real token on fd 5)",
            var = super::template::BASE_URL_VARIABLE
        ));
    }
    if t.api_base_url
        .as_ref()
        .is_some_and(|g| !g.url().starts_with("https://"))
    {
        return Some(format!(
            "template {id:?}: token_mode \"stand_in\" swaps the token inside TLS only: give \
             api_base_url as https://, or give the template \"token_mode\": \"pipe\" (the real \
             token on fd 5)"
        ));
    }
    None
}

/// Why a plain `http://` gateway could be impersonated, or `None`: `http://` is allowed to
/// this machine's loopback only, and a session of a template that shares the host's network
/// (`"network": "host"`, or `"sandbox": false`) can listen on a loopback port itself while the
/// gateway is down, and so receive every request with the token. Such a gateway is used only
/// while every template has a network of its own.
fn gateway_problem(all: &[Template]) -> Option<String> {
    let (t, g) = all.iter().find_map(|t| {
        let g = t.api_base_url.as_ref()?;
        g.url().starts_with("http://").then_some((t, g))
    })?;
    let open = all
        .iter()
        .find(|u| u.sandbox.grants().is_none() || network_rules(&u.network()).shares_host)?;
    Some(format!(
        "template {:?}: api_base_url {:?} is plain http:// on this machine's loopback, where a \
         session of template {:?} (it shares the host's network) could listen in the gateway's \
         place and receive the token; give template {:?} \"network\": \"none\" or an \
         allow-list, or use an https:// gateway",
        t.id,
        g.url(),
        open.id,
        open.id
    ))
}

/// Why `upstream_ca_file` cannot be used, or `None`: not absolute, unreadable, or no PEM
/// certificate in it. The message names the file.
fn ca_file_problem(upstream_ca_file: Option<&Path>) -> Option<String> {
    let p = upstream_ca_file?;
    if !p.is_absolute() {
        let shown = p.display().to_string();
        return Some(format!("upstream_ca_file {shown:?}: give an absolute path"));
    }
    check_ca_file(p)
}

/// The file's problem, in words that name it.
#[cfg(target_os = "linux")]
fn check_ca_file(p: &Path) -> Option<String> {
    crate::stand_in::read_ca_file(p)
        .err()
        .map(|e| e.to_string())
}

/// The file's problem, in words that name it (read only: no stand-in mode here).
#[cfg(not(target_os = "linux"))]
fn check_ca_file(p: &Path) -> Option<String> {
    let e = std::fs::read(p).err()?;
    Some(format!("upstream_ca_file {}: {e}", p.display()))
}
