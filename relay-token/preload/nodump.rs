//! `librelay_nodump.so`: a shared object with no code but one constructor, which makes the
//! process that loads it non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`) before its `main` runs.
//!
//! relay-host preloads it (`LD_PRELOAD`) into the program of a sandboxed launch that gets the
//! token. The kernel then lets no process without `CAP_SYS_PTRACE` open that program's
//! `/proc/PID/mem`, `environ` or `fd/`, whatever its user: the tools Claude Code runs beside the
//! token (same user, same sandbox, no capabilities) can no longer read the token out of Claude's
//! memory. Exec resets the flag, so the constructor runs again in each program started under
//! the same `LD_PRELOAD`.
//!
//! Built by `relay-token`'s build script with the crate's own `rustc` for the target, without
//! the standard library or libc (one raw system call), and embedded in relay-host: there is no
//! file to install beside it.
#![no_std]
#![no_main]

/// `PR_SET_DUMPABLE`, from `<linux/prctl.h>`.
const PR_SET_DUMPABLE: usize = 4;

/// `prctl(2)`'s number.
#[cfg(target_arch = "x86_64")]
const SYS_PRCTL: usize = 157;
#[cfg(target_arch = "aarch64")]
const SYS_PRCTL: usize = 167;

/// `prctl(op, arg, 0, 0, 0)` as a raw system call; its result is ignored (the flag cannot fail
/// to clear for a process's own memory).
///
/// # Safety
/// `PR_SET_DUMPABLE` touches no memory of the caller.
#[cfg(target_arch = "x86_64")]
unsafe fn prctl(op: usize, arg: usize) {
    // SAFETY: the kernel reads the registers only; `syscall` clobbers rcx and r11.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") SYS_PRCTL => _,
            in("rdi") op, in("rsi") arg, in("rdx") 0usize, in("r10") 0usize, in("r8") 0usize,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
}

/// As above, for aarch64 (`svc 0`, the number in x8).
///
/// # Safety
/// `PR_SET_DUMPABLE` touches no memory of the caller.
#[cfg(target_arch = "aarch64")]
unsafe fn prctl(op: usize, arg: usize) {
    // SAFETY: the kernel reads the registers only and returns in x0.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") SYS_PRCTL,
            inlateout("x0") op => _, in("x1") arg, in("x2") 0usize, in("x3") 0usize, in("x4") 0usize,
            options(nostack),
        );
    }
}

/// The constructor the dynamic loader runs when it maps this object.
extern "C" fn no_dump() {
    // SAFETY: see `prctl`.
    unsafe { prctl(PR_SET_DUMPABLE, 0) }
}

/// The dynamic loader runs every function in `.init_array` before the program's `main`.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = no_dump;

/// Never reached: nothing here can panic.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}
