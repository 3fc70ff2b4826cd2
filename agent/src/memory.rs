//! Handing the heap a rebuilt zone leaves behind back to the system.
//!
//! glibc's malloc keeps what is freed for later: the pages of an old zone,
//! freed in the middle of the heap (the watch caches' long-lived entries
//! sit around them), stay in the process's RSS. `malloc_trim(0)` returns
//! every whole free page of every arena to the kernel.

/// Returns the free pages of every malloc arena to the system; true if
/// any was returned. Nothing to do on other C libraries.
pub fn trim() -> bool {
    glibc::trim()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod glibc {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }

    pub fn trim() -> bool {
        // SAFETY: malloc_trim takes no pointer and only works on
        // malloc's own free lists, under the arenas' locks.
        unsafe { malloc_trim(0) != 0 }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod glibc {
    pub fn trim() -> bool {
        false
    }
}
