//! Creating and removing a sandbox's workspace directory.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::Error;

pub fn create(path: &Path) -> Result<(), Error> {
    fs::create_dir_all(path).map_err(|source| workspace_error(path, source))
}

/// Removes the workspace and everything in it; a missing one is fine.
pub async fn remove(path: PathBuf) -> Result<(), Error> {
    tokio::task::spawn_blocking(move || remove_blocking(&path))
        .await
        .map_err(|e| Error::Internal(format!("workspace removal task failed: {e}")))?
}

fn remove_blocking(path: &Path) -> Result<(), Error> {
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

fn workspace_error(path: &Path, source: io::Error) -> Error {
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
