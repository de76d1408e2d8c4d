//! Creating, replacing and removing a sandbox's workspace directory.
//!
//! Work in progress on a workspace (an archive being written, one being
//! unpacked, an old one being removed) lives beside it under the root, in
//! a scratch path named after it with a `~`: no sandbox name contains one,
//! so a scratch path is never a workspace, and whatever an interrupted
//! sandboxd left there is removed at the next start.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::Error;

pub fn create(path: &Path) -> Result<(), Error> {
    fs::create_dir_all(path).map_err(|source| workspace_error(path, source))
}

/// Runs file system work on tokio's blocking threads.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Internal(format!("file system task failed: {e}")))?
}

/// Removes the workspace and everything in it; a missing one is fine.
pub async fn remove(path: PathBuf) -> Result<(), Error> {
    blocking(move || remove_blocking(&path)).await
}

/// The scratch path for `purpose` beside the workspace `path`.
pub fn scratch(path: &Path, purpose: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push("~");
    name.push(purpose);
    PathBuf::from(name)
}

/// Puts the directory `staged` in place of the workspace `path` and
/// removes the old workspace. On failure the old one stays.
pub fn replace(path: &Path, staged: &Path) -> Result<(), Error> {
    let old = scratch(path, "old");
    remove_blocking(&old)?;
    let had_one = match fs::rename(path, &old) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(workspace_error(path, e)),
    };
    if let Err(e) = fs::rename(staged, path) {
        if had_one {
            let _ = fs::rename(&old, path);
        }
        return Err(workspace_error(path, e));
    }
    remove_blocking(&old)
}

/// Removes every scratch path under `root`: at startup nothing is using
/// them. Best effort, like any cleanup at startup.
pub fn remove_leftovers(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().as_encoded_bytes().contains(&b'~') {
            let path = entry.path();
            if fs::remove_file(&path).is_err() {
                let _ = remove_blocking(&path);
            }
        }
    }
}

pub fn remove_blocking(path: &Path) -> Result<(), Error> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            // Tools such as `go mod download` leave read-only directories,
            // which a non-root owner cannot empty until they are writable.
            make_dirs_writable(path);
            match fs::remove_dir_all(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(workspace_error(path, e)),
                _ => Ok(()),
            }
        }
    }
}

/// Gives the owner full access to `dir` and every directory below it,
/// without following symlinks. Best effort: errors are left for the removal
/// to report.
fn make_dirs_writable(dir: &Path) {
    if fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).is_err() {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            make_dirs_writable(&entry.path());
        }
    }
}

pub fn workspace_error(path: &Path, source: io::Error) -> Error {
    Error::Workspace {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path)
            .expect("stat")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn make_dirs_writable_reaches_nested_locked_directories() {
        let root = tempfile::tempdir().expect("tempdir");
        let outer = root.path().join("a");
        let inner = outer.join("b");
        fs::create_dir_all(&inner).expect("mkdir");
        fs::write(inner.join("f"), "x").expect("write");
        fs::set_permissions(inner.join("f"), fs::Permissions::from_mode(0o400)).expect("chmod");
        fs::set_permissions(&inner, fs::Permissions::from_mode(0o500)).expect("chmod");
        fs::set_permissions(&outer, fs::Permissions::from_mode(0o500)).expect("chmod");

        make_dirs_writable(&outer);
        assert_eq!(mode(&outer), 0o700);
        assert_eq!(mode(&inner), 0o700);
        assert_eq!(mode(&inner.join("f")), 0o400, "files are left alone");
    }

    #[test]
    fn replace_swaps_in_the_staged_directory_and_removes_the_old_one() {
        let root = tempfile::tempdir().expect("tempdir");
        let ws = root.path().join("ws");
        let staged = scratch(&ws, "restore");
        assert_eq!(staged, root.path().join("ws~restore"));
        for (dir, file) in [(&ws, "old"), (&staged, "new")] {
            create(dir).expect("create");
            fs::write(dir.join(file), "x").expect("write");
        }
        replace(&ws, &staged).expect("replace");
        assert!(ws.join("new").exists() && !ws.join("old").exists());
        let names: Vec<_> = fs::read_dir(root.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");

        // Without a workspace the staged directory simply becomes one.
        let fresh = root.path().join("fresh");
        let staged = scratch(&fresh, "restore");
        create(&staged).expect("create");
        replace(&fresh, &staged).expect("replace");
        assert!(fresh.is_dir() && !staged.exists());
    }

    #[test]
    fn leftovers_are_the_scratch_paths() {
        let root = tempfile::tempdir().expect("tempdir");
        create(&root.path().join("ws/sub")).expect("create");
        create(&root.path().join("ws~restore/sub")).expect("create");
        fs::write(root.path().join("ws~archive"), "x").expect("write");
        remove_leftovers(root.path());
        let mut names: Vec<_> = fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["ws"]);
    }

    #[test]
    fn remove_is_idempotent_and_removes_contents() {
        let root = tempfile::tempdir().expect("tempdir");
        let ws = root.path().join("ws");
        create(&ws.join("sub")).expect("create");
        fs::write(ws.join("sub/f"), "x").expect("write");
        remove_blocking(&ws).expect("remove");
        assert!(!ws.exists());
        remove_blocking(&ws).expect("remove again");
    }
}
