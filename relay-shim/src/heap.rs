//! The programs' allocator tuning (glibc only; a no-op returning false elsewhere): one arena
//! for a process whose threads allocate little ([`one_arena`], relay-host) and the free memory
//! handed back once the setup is done and the process waits ([`trim_heap`], relay-host and
//! relay-shim while their session runs). The programs' own choice, not the library's: a
//! launcher built on relay-token tunes its allocator as it sees fit.

/// `mallopt(M_ARENA_MAX, 1)`: every thread allocates from the one main arena, instead of glibc
/// giving each new thread an arena of its own (64 KiB and more of private memory apiece for a
/// thread that allocates little). For a process whose threads allocate little and seldom; call
/// it before the first thread starts. Returns true when set; a no-op returning false where the
/// C library is not glibc.
///
/// ```
/// let _ = relay_shim::heap::one_arena();
/// ```
pub fn one_arena() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt takes two integers and only changes the allocator's settings.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// `malloc_trim(0)`: hands the allocator's free memory back to the kernel, in every arena
/// (the free pages inside the heap too, by `madvise(MADV_DONTNEED)`), and returns true when
/// some was. For a process that has done its setup and now waits for long (relay-host while its
/// session runs, relay-shim while its target runs): what the setup freed stops counting as that
/// process's private memory. A no-op returning false where the C library is not glibc.
///
/// ```
/// let big = vec![1u8; 1 << 20];
/// drop(big);
/// let _ = relay_shim::heap::trim_heap();
/// ```
pub fn trim_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes a size and only works inside the allocator, under its locks.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
