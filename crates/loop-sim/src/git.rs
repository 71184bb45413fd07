//! Real git repositories behind the simulated GitHub: a bare repository per simulated
//! repository, which a session's workspace clones (`routing.workspace.cloneUrls` pointed
//! at [`serve_repository`]'s base), so the process graph runs in a checkout that is
//! provably the work item's. Runs `git`; nothing here talks to the network.

use std::io;
use std::path::Path;
use std::process::Command;

/// Serves `repo` (`owner/name`) as a bare repository with one commit on `main` at
/// `<root>/<owner>/<name>.git`, seeded from `<root>/.seed-<owner>-<name>` (commit there
/// and push to change what the next clone gets). Returns the base to give
/// `routing.workspace.cloneUrls` for github.com (`file://<root>`).
pub fn serve_repository(root: &Path, repo: &str) -> io::Result<String> {
    let bare = root.join(format!("{repo}.git"));
    let seed = root.join(format!(".seed-{}", repo.replace('/', "-")));
    std::fs::create_dir_all(&seed)?;
    std::fs::create_dir_all(&bare)?;
    git(&bare, &["init", "-q", "--bare", "-b", "main"])?;
    git(&seed, &["init", "-q", "-b", "main"])?;
    std::fs::write(seed.join("README.md"), format!("# {repo}\n"))?;
    git(&seed, &["add", "README.md"])?;
    git(&seed, &["commit", "-q", "-m", "initial"])?;
    git(&seed, &["push", "-q", &format!("file://{}", bare.display()), "main"])?;
    Ok(format!("file://{}", root.display()))
}

fn git(dir: &Path, args: &[&str]) -> io::Result<()> {
    let mut command = Command::new("git");
    for name in loop_core::checkout::GIT_REPOSITORY_ENV {
        command.env_remove(name);
    }
    let out = command
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=sim", "-c", "user.email=sim@example.com"])
        .args(args)
        .output()?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(io::Error::other(format!("git {}: {}", args.join(" "), stderr.trim())))
}
