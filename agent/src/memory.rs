//! The agent's heap, as glibc's malloc keeps it.
//!
//! - [`trim`]: glibc keeps what is freed for later: the pages of a
//!   rebuilt DNS zone or of a burst's finished pod workers, freed in the
//!   middle of the heap (long-lived caches sit around them), stay in the
//!   process's RSS. `malloc_trim(0)` returns every whole free page of
//!   every arena to the kernel.
//! - [`limit_arenas`]: glibc gives threads that contend on malloc arenas
//!   of their own, up to eight per core, each holding its own free
//!   memory. The agent's work is small allocations from a handful of
//!   runtime threads; two arenas keep its heap from being spread (and
//!   fragmented) over many.

use std::ffi::c_int;

/// Returns the free pages of every malloc arena to the system; true if
/// any was returned. Nothing to do on other C libraries.
pub fn trim() -> bool {
    glibc::trim()
}

/// How many malloc arenas the agent uses unless `MALLOC_ARENA_MAX` says.
pub const DEFAULT_ARENAS: c_int = 2;

/// Caps malloc's arenas at `MALLOC_ARENA_MAX` if set (glibc reads it
/// itself), else at [`DEFAULT_ARENAS`]. Call before any thread starts.
/// Nothing to do on other C libraries.
pub fn limit_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        glibc::arena_max(DEFAULT_ARENAS);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod glibc {
    use std::ffi::c_int;

    extern "C" {
        fn malloc_trim(pad: usize) -> c_int;
        fn mallopt(param: c_int, value: c_int) -> c_int;
    }

    /// glibc's `M_ARENA_MAX` (malloc.h).
    const M_ARENA_MAX: c_int = -8;

    pub fn trim() -> bool {
        // SAFETY: malloc_trim takes no pointer and only works on
        // malloc's own free lists, under the arenas' locks.
        unsafe { malloc_trim(0) != 0 }
    }

    pub fn arena_max(n: c_int) {
        // SAFETY: mallopt takes no pointer; M_ARENA_MAX only bounds how
        // many arenas malloc makes from now on.
        unsafe {
            mallopt(M_ARENA_MAX, n);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod glibc {
    pub fn trim() -> bool {
        false
    }

    pub fn arena_max(_: std::ffi::c_int) {}
}
