//! A seccomp filter that refuses `ptrace(2)`, `process_vm_readv(2)` and `process_vm_writev(2)`
//! to everything in the sandbox.
//!
//! bwrap keeps a small init process as pid 1 of the sandbox's pid namespace: it reaps the
//! program and exits when the program does. Inside the sandbox that init runs as the same user
//! as the program, so without this filter the program could `ptrace(PTRACE_ATTACH, 1)`, stop
//! its init and exit, and the launch would hang for good. The filter is installed in the process
//! that execs bwrap (after `PR_SET_NO_NEW_PRIVS`), so bwrap, its init and everything in the
//! sandbox inherit it; none of them needs `ptrace`. A debugger inside a session is the price.
//!
//! The two `process_vm_*` calls read and write another process's memory under the same check
//! as `ptrace` (same user, the target dumpable): without them refused, a tool Claude Code runs
//! could read the token out of its parent's memory. (`/proc/PID/mem` is the other door to the
//! same memory; a filter cannot see paths, so that one is closed by making the token holder
//! non-dumpable, see [`super::nodump`].)
//!
//! ```
//! let prog = relay_token::sandbox::seccomp::NO_TRACING;
//! assert_eq!(prog.len(), 11);
//! ```

/// `BPF_LD | BPF_W | BPF_ABS`.
const LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`.
const JEQ_K: u16 = 0x15;
/// `BPF_RET | BPF_K`.
const RET_K: u16 = 0x06;
/// `offsetof(struct seccomp_data, nr)`.
const OFF_NR: u32 = 0;
/// `offsetof(struct seccomp_data, arch)`.
const OFF_ARCH: u32 = 4;
/// `SECCOMP_RET_ALLOW`.
const RET_ALLOW: u32 = 0x7fff_0000;
/// `SECCOMP_RET_ERRNO | EPERM`.
const RET_EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;
/// `SECCOMP_RET_KILL_PROCESS`: a call made under another architecture's numbering.
const RET_KILL: u32 = 0x8000_0000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

const fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// `BPF_JMP | BPF_JGE | BPF_K`.
const JGE_K: u16 = 0x35;
/// x86_64's x32 calls carry this bit in their number, under the same architecture value.
const X32_BIT: u32 = 0x4000_0000;

/// The program, in one static array so installing it allocates nothing: a call under another
/// architecture's numbering (or x32's) kills the process, as its numbers mean other calls;
/// `ptrace`, `process_vm_readv` and `process_vm_writev` fail with `EPERM`; everything else is
/// allowed.
pub static NO_TRACING: [libc::sock_filter; 11] = [
    op(LD_W_ABS, 0, 0, OFF_ARCH),
    op(JEQ_K, 1, 0, AUDIT_ARCH),
    op(RET_K, 0, 0, RET_KILL),
    op(LD_W_ABS, 0, 0, OFF_NR),
    op(JGE_K, 0, 1, X32_BIT),
    op(RET_K, 0, 0, RET_KILL),
    // Each refused call jumps to the EPERM return, the last instruction.
    op(JEQ_K, 3, 0, libc::SYS_ptrace as u32),
    op(JEQ_K, 2, 0, libc::SYS_process_vm_readv as u32),
    op(JEQ_K, 1, 0, libc::SYS_process_vm_writev as u32),
    op(RET_K, 0, 0, RET_ALLOW),
    op(RET_K, 0, 0, RET_EPERM),
];

/// Installs the filter in the calling process: `PR_SET_NO_NEW_PRIVS`, then
/// `PR_SET_SECCOMP(SECCOMP_MODE_FILTER)`. Async-signal-safe: two `prctl` calls on static data,
/// no allocation, so it may run in a `pre_exec` hook.
///
/// ```no_run
/// // In a child about to exec bwrap:
/// relay_token::sandbox::seccomp::install_no_tracing()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn install_no_tracing() -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: NO_TRACING.len() as u16,
        filter: NO_TRACING.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) takes integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `prog` points at a static, valid BPF program for the duration of the call; the
    // kernel copies it.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
            0,
            0,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
