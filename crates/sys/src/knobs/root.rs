//! Where knobs live: one root directory under which `/proc`, `/sys/kernel/debug/sched` and the cgroup
//! mounts are resolved, so tests point it at a temporary tree and never touch the machine.

use std::path::{Path, PathBuf};

use super::KnobError;

/// The file-system root knobs are resolved under, and whether system-wide knobs may be written.
#[derive(Clone, Debug)]
pub struct SysRoot {
    root: PathBuf,
    privileged: bool,
}

impl SysRoot {
    /// The machine itself: root `/`, privileged when the effective user is root.
    pub fn real() -> Self {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        SysRoot {
            root: PathBuf::from("/"),
            privileged: euid == 0,
        }
    }

    /// A tree rooted at `root` (tests): privileged unless [`SysRoot::with_privileged`] says otherwise.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        SysRoot {
            root: root.into(),
            privileged: true,
        }
    }

    /// Override whether system-wide knobs may be written (tests of the "not root" path).
    pub fn with_privileged(mut self, privileged: bool) -> Self {
        self.privileged = privileged;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn is_real(&self) -> bool {
        self.root == Path::new("/")
    }

    pub fn privileged(&self) -> bool {
        self.privileged
    }

    /// `a/b` relative to the root (a leading `/` in `rel` is ignored).
    pub fn join(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    /// Where the machine-wide knob locks live: `run/ordo/knobs` under the root (`/run/ordo/knobs` on the
    /// machine). Not root on the machine itself, only cgroup knobs a user may write are changed, and `/run`
    /// is not writable: the user's runtime directory (or the temp directory) holds them instead.
    pub fn lock_dir(&self) -> PathBuf {
        if self.is_real() && !self.privileged {
            let base = std::env::var_os("XDG_RUNTIME_DIR")
                .map(PathBuf::from)
                .filter(|p| p.is_dir())
                .unwrap_or_else(|| {
                    // SAFETY: getuid has no preconditions and cannot fail.
                    let uid = unsafe { libc::getuid() };
                    std::env::temp_dir().join(format!("ordo-{uid}"))
                });
            return base.join("ordo/knobs");
        }
        self.join("run/ordo/knobs")
    }

    /// A key naming the file `path` for `KnobLocks`: its path relative to the root.
    pub fn lock_key(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    /// `/proc/sys/<name with dots as slashes>`.
    pub fn sysctl_path(&self, name: &str) -> PathBuf {
        self.join("proc/sys").join(name.replace('.', "/"))
    }

    /// The debugfs scheduler directory.
    pub fn debugfs_sched_dir(&self) -> PathBuf {
        self.join("sys/kernel/debug/sched")
    }

    /// `/sys/kernel/debug/sched/<name>` (`features` maps to `sched_features` one level up on old kernels).
    pub fn debugfs_path(&self, name: &str) -> PathBuf {
        self.debugfs_sched_dir().join(name)
    }

    /// `/proc/<pid>`.
    pub fn proc_pid(&self, pid: i32) -> PathBuf {
        self.join("proc").join(pid.to_string())
    }

    /// The kernel release (`/proc/sys/kernel/osrelease`).
    pub fn kernel_release(&self) -> Option<String> {
        std::fs::read_to_string(self.sysctl_path("kernel.osrelease"))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// Online CPUs (`/sys/devices/system/cpu/online`).
    pub fn online_cpus(&self) -> Option<Vec<usize>> {
        let s = std::fs::read_to_string(self.join("sys/devices/system/cpu/online")).ok()?;
        super::id::parse_cpu_list(s.trim()).ok()
    }

    /// Mount points from `/proc/mounts` as (fstype, mount point resolved under the root, options).
    pub fn mounts(&self) -> Vec<(String, PathBuf, String)> {
        let Ok(text) = std::fs::read_to_string(self.join("proc/mounts")) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 4).then(|| (f[2].to_string(), self.join(f[1]), f[3].to_string()))
            })
            .collect()
    }

    /// The cgroup directory holding `file` for process `pid`: cgroup v2 when `file` is a v2 file (cpu.weight,
    /// cpu.max) and v2 is mounted; the v1 `cpu` controller for v1 files (cpu.shares, cpu.cfs_quota_us).
    pub fn cgroup_dir(&self, pid: i32, file: &str) -> Result<PathBuf, String> {
        let v1 = file.starts_with("cpu.shares") || file.starts_with("cpu.cfs_");
        let path = self.proc_pid(pid).join("cgroup");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mounts = self.mounts();
        if v1 {
            let mount = mounts
                .iter()
                .find(|(t, _, o)| t == "cgroup" && o.split(',').any(|x| x == "cpu"))
                .ok_or_else(|| format!("{file} is a cgroup v1 file but no v1 cpu controller is mounted (this machine uses cgroup v2: use cgroup:cpu.weight / cgroup:cpu.max)"))?;
            let rel = text
                .lines()
                .find_map(|l| {
                    let mut p = l.splitn(3, ':');
                    let _id = p.next()?;
                    let ctrls = p.next()?;
                    let path = p.next()?;
                    ctrls
                        .split(',')
                        .any(|c| c == "cpu")
                        .then(|| path.to_string())
                })
                .ok_or_else(|| format!("process {pid} is in no v1 cpu cgroup"))?;
            Ok(mount.1.join(rel.trim_start_matches('/')))
        } else {
            let mount = mounts
                .iter()
                .find(|(t, _, _)| t == "cgroup2")
                .ok_or_else(|| format!("{file} is a cgroup v2 file but cgroup v2 is not mounted (on cgroup v1 use cgroup:cpu.shares / cgroup:cpu.cfs_quota_us)"))?;
            let rel = text
                .lines()
                .find_map(|l| l.strip_prefix("0::"))
                .ok_or_else(|| {
                    format!("process {pid} has no cgroup v2 entry in {}", path.display())
                })?;
            Ok(mount.1.join(rel.trim().trim_start_matches('/')))
        }
    }
}

/// `(major, minor)` of a release string such as `6.18.44-fc`.
pub(crate) fn parse_kernel_release(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Whether the kernel under `root` is at least `major.minor` (false when unknown).
pub(crate) fn kernel_at_least(root: &SysRoot, major: u32, minor: u32) -> bool {
    root.kernel_release()
        .and_then(|r| parse_kernel_release(&r))
        .is_some_and(|v| v >= (major, minor))
}

pub(crate) fn read_trimmed(path: &Path) -> Result<String, KnobError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| KnobError::io(path, e))
}

pub(crate) fn write_value(path: &Path, value: &str) -> Result<(), KnobError> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| KnobError::io(path, e))?;
    f.write_all(format!("{value}\n").as_bytes())
        .map_err(|e| KnobError::io(path, e))
}

/// A temporary tree holding `files` (path under the root, content) and the privileged [`SysRoot`] at it,
/// for the knob modules' tests.
#[cfg(test)]
pub(crate) fn fake_root(files: &[(&str, &str)]) -> (tempfile::TempDir, SysRoot) {
    let d = tempfile::tempdir().unwrap();
    for (rel, content) in files {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    let r = SysRoot::at(d.path());
    (d, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_parsing() {
        assert_eq!(parse_kernel_release("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(parse_kernel_release("5.4.0"), Some((5, 4)));
        assert_eq!(parse_kernel_release("x"), None);
    }

    #[test]
    fn paths_resolve_under_root() {
        let r = SysRoot::at("/tmp/x");
        assert_eq!(
            r.sysctl_path("kernel.sched_rr_timeslice_ms"),
            PathBuf::from("/tmp/x/proc/sys/kernel/sched_rr_timeslice_ms")
        );
        assert_eq!(
            r.debugfs_path("base_slice_ns"),
            PathBuf::from("/tmp/x/sys/kernel/debug/sched/base_slice_ns")
        );
    }

    #[test]
    fn cgroup_dirs() {
        let d = tempfile::tempdir().unwrap();
        let r = SysRoot::at(d.path());
        std::fs::create_dir_all(d.path().join("proc/7")).unwrap();
        std::fs::write(
            d.path().join("proc/mounts"),
            "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n",
        )
        .unwrap();
        std::fs::write(d.path().join("proc/7/cgroup"), "1:cpu:/a\n0::/web\n").unwrap();
        assert_eq!(
            r.cgroup_dir(7, "cpu.weight").unwrap(),
            d.path().join("sys/fs/cgroup/unified/web")
        );
        assert_eq!(
            r.cgroup_dir(7, "cpu.shares").unwrap(),
            d.path().join("sys/fs/cgroup/cpu/a")
        );
    }
}
