//! The sandbox profile and its renderings. (Stub: the real module is being written.)
#![allow(missing_docs, dead_code)]
use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct SandboxError(pub String);
impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
#[derive(Debug, Default)]
pub struct Profile {
    read: Vec<PathBuf>,
    rw: Vec<PathBuf>,
    deny: Vec<PathBuf>,
    tmp: Option<PathBuf>,
    project: Option<PathBuf>,
    cmd: Option<PathBuf>,
}
pub struct Resolved(Profile);
impl Profile {
    pub fn new() -> Profile {
        Profile::default()
    }
    pub fn read(&mut self, p: PathBuf) -> &mut Self {
        self.read.push(p);
        self
    }
    pub fn read_write(&mut self, p: PathBuf) -> &mut Self {
        self.rw.push(p);
        self
    }
    pub fn deny(&mut self, p: PathBuf) -> &mut Self {
        self.deny.push(p);
        self
    }
    pub fn project(&mut self, p: PathBuf) -> &mut Self {
        self.project = Some(p);
        self
    }
    pub fn tmp(&mut self, p: PathBuf) -> &mut Self {
        self.tmp = Some(p);
        self
    }
    pub fn command_dir(&mut self, p: PathBuf) -> &mut Self {
        self.cmd = Some(p);
        self
    }
    pub fn resolve(&self, _all_rw: &[PathBuf]) -> Result<Resolved, SandboxError> {
        Err(SandboxError("sandbox not yet implemented".into()))
    }
}
impl Resolved {
    pub fn bwrap_argv(&self, bwrap: &Path, command: &[OsString]) -> Vec<OsString> {
        let mut v = vec![bwrap.into()];
        v.extend(command.iter().cloned());
        v
    }
}
pub fn expand_grant(
    value: &str,
    home: &Path,
    project: Option<&Path>,
) -> Result<PathBuf, SandboxError> {
    let _ = (home, project);
    Ok(PathBuf::from(value))
}
pub fn find_bwrap(_setting: Option<&Path>) -> Result<PathBuf, SandboxError> {
    Err(SandboxError("stub".into()))
}
