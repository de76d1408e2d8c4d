//! Whether a symlink stays inside the workspace: its target followed as the
//! kernel would, through the other symlinks of the tree.
//!
//! Packing and restoring must agree on this exactly, or a workspace that
//! packs would not restore. Both judge a symlink by the tree as a restore
//! leaves it, which only the archive's own symlinks can redirect (see
//! [`Links`]); while a restore is still writing, [`on_disk`] judges by what
//! is there so far, and says when a later entry could change the answer.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Most symlinks followed while resolving one target, as in Linux.
const MAX_LINK_HOPS: usize = 40;

/// What a path in the tree is, to a symlink being followed through it.
pub enum Node {
    Link(PathBuf),
    /// Anything else there: a later entry cannot make it a symlink.
    Plain,
    /// Nothing yet: a later entry may be a symlink here.
    Missing,
}

/// Why a symlink is refused.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    pub why: &'static str,
    /// Whether a missing name was followed on the way, so that entries
    /// written later may still make the symlink acceptable.
    pub provisional: bool,
}

/// The symlinks of a complete tree by path (relative to the workspace):
/// everything that can redirect a symlink's target there.
pub struct Links<'a>(HashMap<&'a Path, &'a Path>);

impl<'a> Links<'a> {
    /// From `(path, target)` pairs.
    pub fn new(links: impl IntoIterator<Item = (&'a Path, &'a Path)>) -> Self {
        Links(links.into_iter().collect())
    }

    /// Follows the symlink `link` to `target` through this tree.
    pub fn resolve(&self, link: &Path, target: &Path) -> Result<(), &'static str> {
        let node = |at: &Path| match self.0.get(at) {
            Some(target) => Node::Link(target.to_path_buf()),
            None => Node::Plain,
        };
        resolve(node, link, target).map_err(|refused| refused.why)
    }
}

/// What `path` (relative to `root`) is on disk now.
pub fn on_disk(root: &Path) -> impl Fn(&Path) -> Node + '_ {
    move |path| match fs::read_link(root.join(path)) {
        Ok(target) => Node::Link(target),
        // EINVAL: there, and not a symlink.
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => Node::Plain,
        Err(_) => Node::Missing,
    }
}

/// Follows `target`, as the kernel would for a symlink at `link` (a path
/// relative to the workspace), through the tree `node` describes; fails if
/// that leaves the workspace. Names that are not symlinks are taken as they
/// are, since only symlinks can redirect the path.
pub fn resolve(node: impl Fn(&Path) -> Node, link: &Path, target: &Path) -> Result<(), Refused> {
    let mut at = link.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut todo: VecDeque<OsString> = steps(target).collect();
    let mut hops = 0;
    let mut provisional = false;
    let refused = |why, provisional| Err(Refused { why, provisional });
    while let Some(step) = todo.pop_front() {
        match step.as_bytes() {
            b"/" => return refused("the symlink's target is absolute", provisional),
            b"." => {}
            b".." => {
                if !at.pop() {
                    return refused("the symlink leads out of the workspace", provisional);
                }
            }
            _ => {
                at.push(&step);
                match node(&at) {
                    Node::Link(next) => {
                        hops += 1;
                        if hops > MAX_LINK_HOPS {
                            return refused(
                                "the symlink goes through too many symlinks",
                                provisional,
                            );
                        }
                        at.pop();
                        for step in steps(&next).rev() {
                            todo.push_front(step);
                        }
                    }
                    Node::Plain => {}
                    Node::Missing => provisional = true,
                }
            }
        }
    }
    Ok(())
}

/// A path's components as names, `/` for the root (never a name).
fn steps(path: &Path) -> impl DoubleEndedIterator<Item = OsString> + '_ {
    path.components().map(|c| c.as_os_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn resolved(root: &Path, link: &str, target: &str) -> Result<(), &'static str> {
        resolve(on_disk(root), Path::new(link), Path::new(target)).map_err(|r| r.why)
    }

    #[test]
    fn symlinks_resolve_inside_or_are_refused() {
        let root = tempfile::tempdir().expect("tempdir");
        let root = root.path();
        fs::create_dir_all(root.join("d/e")).unwrap();
        for (link, target) in [
            ("l", "d"),
            ("d/l", ".."),
            ("d/e/l", "../../d/./e"),
            ("l", "missing/x"),
            ("l", "missing/.."),
            ("d/l", "e/../../d"),
        ] {
            assert_eq!(resolved(root, link, target), Ok(()), "{link} -> {target}");
        }
        for (link, target) in [
            ("l", "/etc"),
            ("l", ".."),
            ("d/l", "../.."),
            ("l", "d/../.."),
            ("l", "missing/../.."),
        ] {
            assert!(resolved(root, link, target).is_err(), "{link} -> {target}");
        }
    }

    #[test]
    fn symlinks_are_followed_through_other_symlinks() {
        let root = tempfile::tempdir().expect("tempdir");
        let root = root.path();
        fs::create_dir_all(root.join("d")).unwrap();
        // d/up -> .. is inside; d/up/.. through it is not.
        symlink("..", root.join("d/up")).unwrap();
        assert_eq!(resolved(root, "d/up", ".."), Ok(()));
        assert!(resolved(root, "l", "d/up/..").is_err());
        assert_eq!(
            resolved(root, "l", "d/up/up/x"),
            Ok(()),
            "root/up is missing"
        );
        assert!(resolved(root, "l", "d/up/d/up/..").is_err());
        symlink("/etc", root.join("abs")).unwrap();
        assert!(resolved(root, "l", "abs/passwd").is_err());
        symlink("loop", root.join("loop")).unwrap();
        assert_eq!(
            resolved(root, "l", "loop"),
            Err("the symlink goes through too many symlinks")
        );
    }

    #[test]
    fn a_refusal_past_a_missing_name_is_provisional() {
        let root = tempfile::tempdir().expect("tempdir");
        let root = root.path();
        fs::create_dir_all(root.join("a/b/c")).unwrap();
        let judge = |target: &str| resolve(on_disk(root), Path::new("l"), Path::new(target));
        // `m` may yet be a symlink to a/b/c, which would make this inside.
        assert_eq!(
            judge("m/../.."),
            Err(Refused {
                why: "the symlink leads out of the workspace",
                provisional: true
            })
        );
        // Nothing written later can change these.
        for target in ["..", "a/../..", "/etc"] {
            assert!(judge(target).is_err_and(|r| !r.provisional), "{target}");
        }
        symlink("a/b/c", root.join("m")).unwrap();
        assert_eq!(judge("m/../.."), Ok(()));
    }

    #[test]
    fn a_complete_tree_is_judged_by_its_symlinks_alone() {
        let pairs = [("m", "a/b/c"), ("l", "m/../.."), ("out", "m/../../../..")];
        let links = Links::new(pairs.iter().map(|(p, t)| (Path::new(*p), Path::new(*t))));
        assert_eq!(links.resolve(Path::new("l"), Path::new("m/../..")), Ok(()));
        assert_eq!(
            links.resolve(Path::new("out"), Path::new("m/../../../..")),
            Err("the symlink leads out of the workspace")
        );
    }
}
