//! Compiles the pause container's program (`pause/pause.c`) into a static
//! executable in OUT_DIR; `runtime/docker/images.rs` embeds it and imports
//! it into Docker as `bosun.local/pause:<version>`, so no registry is
//! needed.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=pause/pause.c");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let exe = out.join("pause");

    // The cc crate finds the C compiler for the target (honouring CC,
    // CC_<target>, cross toolchains); we only borrow its detection.
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .opt_level_str("s")
        .get_compiler();
    let mut cmd = compiler.to_command();
    cmd.args(["-static", "-Os", "-s", "-Wall", "-Wextra", "-o"])
        .arg(&exe)
        .arg("pause/pause.c");
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running the C compiler for pause/pause.c: {e}"));
    if !status.success() {
        panic!(
            "compiling pause/pause.c failed ({status}); a C compiler and a static libc \
             (Debian: libc6-dev) are needed"
        );
    }
}
