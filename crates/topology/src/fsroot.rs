//! Reading files inside a filesystem root (`/` on a live machine, or an extracted snapshot).
//!
//! Paths given to [`FsRoot`] are absolute paths *inside* the root (`/sys/bus/pci/devices`).
//! Symlinks are resolved by hand, component by component, so that an absolute link target is
//! taken relative to the root and `..` never climbs above it: a snapshot can never make us read
//! the host's files.

use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

/// Symlinks followed while resolving one path before giving up (as the kernel's ELOOP).
const MAX_LINKS: usize = 40;

/// One step of a path still to resolve.
enum Step {
    Up,
    Name(OsString),
}

/// A filesystem root that every read goes through.
#[derive(Debug, Clone)]
pub(crate) struct FsRoot {
    base: PathBuf,
}

impl FsRoot {
    pub(crate) fn new(base: impl Into<PathBuf>) -> Self {
        Self { base: base.into() }
    }

    /// Where an in-root path lies on the host, without resolving anything.
    fn host(&self, path: &Path) -> PathBuf {
        self.base.join(path.strip_prefix("/").unwrap_or(path))
    }

    /// The in-root path with every symlink resolved (like `realpath -m`: missing components are
    /// kept as written). `None` on a symlink loop.
    pub(crate) fn resolve(&self, path: impl AsRef<Path>) -> Option<PathBuf> {
        let mut done = PathBuf::from("/");
        let mut todo = Vec::new();
        push_steps(&mut todo, path.as_ref());
        let mut links = 0;
        while let Some(step) = todo.pop() {
            let name = match step {
                Step::Up => {
                    done.pop();
                    continue;
                }
                Step::Name(name) => name,
            };
            let next = done.join(&name);
            match fs::read_link(self.host(&next)) {
                Ok(target) => {
                    links += 1;
                    if links > MAX_LINKS {
                        return None;
                    }
                    if target.is_absolute() {
                        done = PathBuf::from("/");
                    }
                    push_steps(&mut todo, &target);
                }
                Err(_) => done = next,
            }
        }
        Some(done)
    }

    /// Host path of an in-root path, resolved.
    fn resolved_host(&self, path: impl AsRef<Path>) -> Option<PathBuf> {
        self.resolve(path).map(|p| self.host(&p))
    }

    /// The whole file as text; `None` when missing, unreadable or not UTF-8.
    pub(crate) fn read(&self, path: impl AsRef<Path>) -> Option<String> {
        fs::read_to_string(self.resolved_host(path)?).ok()
    }

    /// The whole file's bytes (at most `max`); `None` when missing or unreadable.
    pub(crate) fn bytes(&self, path: impl AsRef<Path>, max: u64) -> Option<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::new();
        fs::File::open(self.resolved_host(path)?)
            .ok()?
            .take(max)
            .read_to_end(&mut out)
            .ok()?;
        Some(out)
    }

    /// The file's text, trimmed; `None` when missing or blank.
    pub(crate) fn text(&self, path: impl AsRef<Path>) -> Option<String> {
        let text = self.read(path)?;
        let trimmed = text.trim();
        (!trimmed.is_empty()).then(|| trimmed.to_string())
    }

    /// The file's trimmed text parsed as `T`.
    pub(crate) fn parse<T: FromStr>(&self, path: impl AsRef<Path>) -> Option<T> {
        self.text(path)?.parse().ok()
    }

    pub(crate) fn exists(&self, path: impl AsRef<Path>) -> bool {
        self.resolved_host(path).is_some_and(|p| p.exists())
    }

    /// Names of a directory's entries, sorted; empty when it is missing.
    pub(crate) fn names(&self, dir: impl AsRef<Path>) -> Vec<String> {
        let Some(dir) = self.resolved_host(dir) else {
            return Vec::new();
        };
        let Ok(entries) = fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }

    /// Last component of a symlink's target (a device's `driver` link → `nvme`).
    pub(crate) fn link_name(&self, path: impl AsRef<Path>) -> Option<String> {
        let path = path.as_ref();
        let parent = self.resolve(path.parent()?)?;
        let target = fs::read_link(self.host(&parent.join(path.file_name()?))).ok()?;
        Some(target.file_name()?.to_str()?.to_string())
    }
}

/// Pushes a path's steps in reverse, so that popping yields them in order.
fn push_steps(todo: &mut Vec<Step>, path: &Path) {
    let steps: Vec<Step> = path
        .components()
        .filter_map(|c| match c {
            Component::ParentDir => Some(Step::Up),
            Component::Normal(name) => Some(Step::Name(name.to_os_string())),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    todo.extend(steps.into_iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, FsRoot) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = FsRoot::new(dir.path());
        fs::create_dir_all(dir.path().join("sys/devices/pci0000:00/0000:00:01.0")).expect("mkdir");
        fs::create_dir_all(dir.path().join("sys/bus/pci/devices")).expect("mkdir");
        fs::write(
            dir.path().join("sys/devices/pci0000:00/0000:00:01.0/class"),
            "0x010802\n",
        )
        .expect("write");
        (dir, root)
    }

    #[test]
    fn relative_links_resolve_inside_the_root() {
        let (dir, root) = tree();
        symlink(
            "../../../devices/pci0000:00/0000:00:01.0",
            dir.path().join("sys/bus/pci/devices/0000:00:01.0"),
        )
        .expect("symlink");
        let p = root.resolve("/sys/bus/pci/devices/0000:00:01.0");
        assert_eq!(
            p,
            Some(PathBuf::from("/sys/devices/pci0000:00/0000:00:01.0"))
        );
        assert_eq!(
            root.text("/sys/bus/pci/devices/0000:00:01.0/class")
                .as_deref(),
            Some("0x010802")
        );
    }

    #[test]
    fn absolute_and_climbing_links_stay_in_the_root() {
        let (dir, root) = tree();
        symlink("/sys/devices", dir.path().join("abs")).expect("symlink");
        symlink("../../../../../../../sys", dir.path().join("sys/up")).expect("symlink");
        assert_eq!(root.resolve("/abs"), Some(PathBuf::from("/sys/devices")));
        assert_eq!(
            root.resolve("/sys/up/devices"),
            Some(PathBuf::from("/sys/devices"))
        );
        assert_eq!(root.names("/abs"), vec!["pci0000:00".to_string()]);
    }

    #[test]
    fn loops_and_missing_files_are_none() {
        let (dir, root) = tree();
        symlink("b", dir.path().join("a")).expect("symlink");
        symlink("a", dir.path().join("b")).expect("symlink");
        assert_eq!(root.resolve("/a"), None);
        assert_eq!(root.read("/a"), None);
        assert_eq!(root.text("/nope"), None);
        assert!(root.names("/nope").is_empty());
        assert_eq!(root.link_name("/nope/driver"), None);
    }

    #[test]
    fn link_name_is_the_target_basename() {
        let (dir, root) = tree();
        symlink(
            "../../../bus/pci/drivers/nvme",
            dir.path()
                .join("sys/devices/pci0000:00/0000:00:01.0/driver"),
        )
        .expect("symlink");
        assert_eq!(
            root.link_name("/sys/devices/pci0000:00/0000:00:01.0/driver")
                .as_deref(),
            Some("nvme")
        );
    }
}
