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

    /// The tightest memory limit on process `pid` from its cgroup or any ancestor: cgroup v2 `memory.max`
    /// (a number, not `max`), else cgroup v1 `memory.limit_in_bytes` (values of 2^60 and more mean no
    /// limit). `None` when no cgroup limits it. What the cgroup already uses is `memory.current`
    /// (`memory.usage_in_bytes`) less its page cache (`file` / `total_cache` in `memory.stat`), which the
    /// kernel reclaims before it OOM-kills.
    pub fn cgroup_memory(&self, pid: i32) -> Option<CgroupMemory> {
        let text = std::fs::read_to_string(self.proc_pid(pid).join("cgroup")).ok()?;
        let mounts = self.mounts();
        let v2 = mounts
            .iter()
            .find(|(t, _, _)| t == "cgroup2")
            .and_then(|(_, m, _)| {
                let rel = text.lines().find_map(|l| l.strip_prefix("0::"))?;
                Some((m.clone(), rel.trim().to_string()))
            });
        let v1 = mounts
            .iter()
            .find(|(t, _, o)| t == "cgroup" && o.split(',').any(|x| x == "memory"))
            .and_then(|(_, m, _)| {
                let rel = text.lines().find_map(|l| {
                    let mut p = l.splitn(3, ':');
                    let _id = p.next()?;
                    let ctrls = p.next()?;
                    let path = p.next()?;
                    ctrls
                        .split(',')
                        .any(|c| c == "memory")
                        .then(|| path.trim().to_string())
                })?;
                Some((m.clone(), rel))
            });
        let tightest = |a: Option<CgroupMemory>, b: Option<CgroupMemory>| match (a, b) {
            (Some(a), Some(b)) => Some(if b.headroom() < a.headroom() { b } else { a }),
            (a, b) => a.or(b),
        };
        let v2 = v2.and_then(|(mount, rel)| {
            walk_up(&mount, &rel, |dir| {
                let limit: u64 = read_trimmed(&dir.join("memory.max")).ok()?.parse().ok()?;
                let current: u64 = read_trimmed(&dir.join("memory.current"))
                    .ok()?
                    .parse()
                    .ok()?;
                let cache = stat_field(&dir.join("memory.stat"), &["file"]);
                Some(CgroupMemory {
                    limit,
                    used: current.saturating_sub(cache),
                    file: dir.join("memory.max"),
                })
            })
        });
        let v1 = v1.and_then(|(mount, rel)| {
            walk_up(&mount, &rel, |dir| {
                let limit: u64 = read_trimmed(&dir.join("memory.limit_in_bytes"))
                    .ok()?
                    .parse()
                    .ok()
                    .filter(|&l: &u64| l < 1 << 60)?;
                let usage: u64 = read_trimmed(&dir.join("memory.usage_in_bytes"))
                    .ok()?
                    .parse()
                    .ok()?;
                let cache = stat_field(&dir.join("memory.stat"), &["total_cache", "cache"]);
                Some(CgroupMemory {
                    limit,
                    used: usage.saturating_sub(cache),
                    file: dir.join("memory.limit_in_bytes"),
                })
            })
        });
        tightest(v2, v1)
    }
}

/// A cgroup's memory limit and what it holds that the kernel cannot reclaim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMemory {
    /// Bytes.
    pub limit: u64,
    /// Bytes in use, less page cache.
    pub used: u64,
    /// The file that sets the limit.
    pub file: PathBuf,
}

impl CgroupMemory {
    /// Bytes the cgroup may still take before it reclaims hard or OOM-kills.
    pub fn headroom(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

/// The tightest of `limit(dir)` over the cgroup `rel` under `mount` and its ancestors up to the mount.
fn walk_up(
    mount: &Path,
    rel: &str,
    limit: impl Fn(&Path) -> Option<CgroupMemory>,
) -> Option<CgroupMemory> {
    let mut dir = mount.join(rel.trim_start_matches('/'));
    let mut best: Option<CgroupMemory> = None;
    loop {
        if let Some(m) = limit(&dir)
            && best.as_ref().is_none_or(|b| m.headroom() < b.headroom())
        {
            best = Some(m);
        }
        if dir == mount || !dir.starts_with(mount) {
            return best;
        }
        dir = dir.parent()?.to_path_buf();
    }
}

/// The first of `names` found in a `memory.stat` file (`name value` lines), 0 when none is.
fn stat_field(path: &Path, names: &[&str]) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    names
        .iter()
        .find_map(|n| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == *n).then(|| v.trim().parse().ok()).flatten()
            })
        })
        .unwrap_or(0)
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

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (rel, v) in files {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        }
        d
    }

    #[test]
    fn the_tightest_cgroup_v2_memory_limit_counts_ancestors_and_leaves_out_page_cache() {
        const MB: u64 = 1 << 20;
        let d = tree(&[
            ("proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"),
            ("proc/42/cgroup", "0::/user.slice/probe\n"),
            ("sys/fs/cgroup/user.slice/memory.max", "max\n"),
            ("sys/fs/cgroup/user.slice/probe/memory.max", "1073741824\n"),
            (
                "sys/fs/cgroup/user.slice/probe/memory.current",
                "209715200\n",
            ),
            (
                "sys/fs/cgroup/user.slice/probe/memory.stat",
                "anon 104857600\nfile 104857600\n",
            ),
        ]);
        let root = SysRoot::at(d.path());
        let m = root.cgroup_memory(42).unwrap();
        assert_eq!(
            (m.limit, m.used, m.headroom()),
            (1024 * MB, 100 * MB, 924 * MB)
        );
        assert!(m.file.ends_with("user.slice/probe/memory.max"), "{m:?}");
        // A tighter limit on an ancestor wins.
        std::fs::write(
            d.path().join("sys/fs/cgroup/user.slice/memory.max"),
            "536870912\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("sys/fs/cgroup/user.slice/memory.current"),
            "0\n",
        )
        .unwrap();
        let m = root.cgroup_memory(42).unwrap();
        assert_eq!(m.headroom(), 512 * MB);
        assert!(m.file.ends_with("user.slice/memory.max"), "{m:?}");
        // No limit anywhere: none.
        let free = tree(&[
            ("proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"),
            ("proc/42/cgroup", "0::/a\n"),
            ("sys/fs/cgroup/a/memory.max", "max\n"),
        ]);
        assert_eq!(SysRoot::at(free.path()).cgroup_memory(42), None);
    }

    #[test]
    fn a_cgroup_v1_memory_limit_is_read_and_the_unlimited_value_ignored() {
        let d = tree(&[
            (
                "proc/mounts",
                "cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,memory 0 0\n",
            ),
            (
                "proc/7/cgroup",
                "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
            ),
            (
                "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
                "268435456\n",
            ),
            (
                "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes",
                "100000000\n",
            ),
            (
                "sys/fs/cgroup/memory/docker/abc/memory.stat",
                "cache 1\ntotal_cache 50000000\n",
            ),
            (
                "sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
        ]);
        let m = SysRoot::at(d.path()).cgroup_memory(7).unwrap();
        assert_eq!((m.limit, m.used), (268_435_456, 50_000_000));
    }
}
