//! Build script of the client and the relay (their Cargo.toml `build` key points here): records
//! the git revision the binary is built from, for `--version`. Outside a git checkout (a source
//! tarball) the revision is "unknown revision".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let rev =
        git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown revision".into());
    println!("cargo:rustc-env=REPOWIRE_GIT_REV={rev}");
    // Built again when HEAD moves: HEAD itself, the branch it names, and packed refs.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/packed-refs");
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{branch}");
        }
    }
}
