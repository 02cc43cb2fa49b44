//! `fingerprint::collect_from` on a fake machine in a temp dir: each figure comes from the source the
//! docs name, with the fallbacks taken in order (kernel config in /boot when /proc/config.gz is absent,
//! the boot command line's preempt= for a PREEMPT_DYNAMIC kernel, uname -v when there is no config).

use std::fs;
use std::path::Path;

use ordo_sys::fingerprint::Sources;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn machine(dir: &Path) -> Sources {
    write(dir, "proc/sys/kernel/hostname", "box\n");
    write(dir, "proc/sys/kernel/osrelease", "6.12.9-test\n");
    write(
        dir,
        "proc/sys/kernel/version",
        "#1 SMP PREEMPT_DYNAMIC Tue Jan  1 00:00:00 UTC 2030\n",
    );
    write(
        dir,
        "proc/cpuinfo",
        "processor\t: 0\nmodel name\t: Test CPU 9000\n\nprocessor\t: 1\nmodel name\t: Test CPU 9000\n\nprocessor\t: 2\n\nprocessor\t: 3\n",
    );
    write(
        dir,
        "proc/meminfo",
        "MemTotal:        8000000 kB\nMemFree:         100 kB\n",
    );
    write(
        dir,
        "proc/pressure/cpu",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    );
    write(
        dir,
        "sys/devices/system/clocksource/clocksource0/current_clocksource",
        "hpet\n",
    );
    write(
        dir,
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        "performance\n",
    );
    Sources {
        proc: dir.join("proc"),
        sys: dir.join("sys"),
        boot: dir.join("boot"),
        estimate_hz: false,
    }
}

#[test]
fn boot_config_and_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = machine(dir.path());
    write(
        dir.path(),
        "boot/config-6.12.9-test",
        "CONFIG_HZ_1000=y\nCONFIG_HZ=1000\nCONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n",
    );
    write(
        dir.path(),
        "proc/cmdline",
        "root=/dev/vda preempt=full quiet\n",
    );
    write(dir.path(), "sys/kernel/sched_ext/state", "enabled\n");
    write(dir.path(), "sys/kernel/sched_ext/root/ops", "rusty\n");
    let fp = ordo_sys::fingerprint::collect_from(&src);
    assert_eq!(fp.hostname, "box");
    assert_eq!(fp.kernel_release, "6.12.9-test");
    assert_eq!(fp.config_hz, Some(1000));
    assert_eq!(fp.config_hz_source, "/boot/config-6.12.9-test");
    assert_eq!(fp.preemption.as_deref(), Some("full"));
    assert_eq!(fp.preemption_source, "/proc/cmdline preempt=");
    assert_eq!(fp.preempt_dynamic, Some(true));
    assert_eq!(fp.cpu_model, "Test CPU 9000");
    assert_eq!(fp.cores, 4);
    assert_eq!(fp.memory_bytes, 8_000_000 * 1024);
    assert_eq!(fp.sched_ext, "enabled (rusty)");
    assert_eq!(fp.clocksource.as_deref(), Some("hpet"));
    assert_eq!(fp.governor.as_deref(), Some("performance"));
    assert!(fp.psi);
}

#[test]
fn config_default_then_debugfs() {
    let dir = tempfile::tempdir().unwrap();
    let src = machine(dir.path());
    write(
        dir.path(),
        "boot/config-6.12.9-test",
        "CONFIG_HZ=250\nCONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y\n",
    );
    let fp = ordo_sys::fingerprint::collect_from(&src);
    assert_eq!(fp.preemption.as_deref(), Some("none"));
    assert_eq!(fp.preemption_source, "/boot/config-6.12.9-test");
    // The mode in force, when debugfs is readable, wins.
    write(
        dir.path(),
        "sys/kernel/debug/sched/preempt",
        "none voluntary full (lazy)\n",
    );
    write(
        dir.path(),
        "sys/kernel/debug/sched/base_slice_ns",
        "3000000\n",
    );
    let fp = ordo_sys::fingerprint::collect_from(&src);
    assert_eq!(fp.preemption.as_deref(), Some("lazy"));
    assert_eq!(fp.preemption_source, "/sys/kernel/debug/sched/preempt");
    assert_eq!(fp.base_slice_ns, Some(3_000_000));
}

#[test]
fn nothing_but_uname() {
    let dir = tempfile::tempdir().unwrap();
    let src = machine(dir.path());
    let fp = ordo_sys::fingerprint::collect_from(&src);
    assert_eq!(fp.config_hz, None);
    assert_eq!(fp.config_hz_source, "unknown");
    assert_eq!(fp.preemption.as_deref(), Some("dynamic"));
    assert_eq!(fp.preemption_source, "uname -v");
    assert_eq!(fp.sched_ext, "absent");
    assert!(!fp.schedstat);
}
