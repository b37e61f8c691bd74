//! The kernel: identity, boot parameters, build configuration, preemption model, tick,
//! timer resolution, clocksource and tracers.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::read::read_trimmed;

/// What `uname` says about the running kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelInfo {
    /// `uname -r`, such as `6.18.44-fc-v782`.
    pub release: String,
    /// `uname -v`, such as `#1 SMP PREEMPT_DYNAMIC ...`.
    pub version: String,
    /// `uname -m`, such as `x86_64`.
    pub machine: String,
    /// `uname -n`, the host name.
    pub hostname: String,
}

/// The running kernel's identity (`uname`); fields are empty if `uname` fails.
pub fn kernel() -> KernelInfo {
    // SAFETY: utsname is plain data made of byte arrays; all zeroes is a valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname that outlives the call.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return KernelInfo::default();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    KernelInfo {
        release: field(&uts.release),
        version: field(&uts.version),
        machine: field(&uts.machine),
        hostname: field(&uts.nodename),
    }
}

/// The kernel command line (`/proc/cmdline`), trimmed; empty if unreadable.
pub fn cmdline() -> String {
    read_trimmed("/proc/cmdline").unwrap_or_default()
}

/// The boot parameters that matter for real-time work, as written on the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootParams {
    /// `isolcpus=` (may carry flags: `domain,managed_irq,2-3`).
    pub isolcpus: Option<String>,
    /// `nohz_full=`.
    pub nohz_full: Option<String>,
    /// `rcu_nocbs=`.
    pub rcu_nocbs: Option<String>,
    /// `irqaffinity=` (default IRQ affinity).
    pub irqaffinity: Option<String>,
    /// `preempt=` (`none`, `voluntary`, `full`, `lazy`; PREEMPT_DYNAMIC kernels only).
    pub preempt: Option<String>,
    /// `idle=` (`poll`, `halt`, ...).
    pub idle: Option<String>,
    /// `processor.max_cstate=` or `intel_idle.max_cstate=`.
    pub max_cstate: Option<String>,
    /// `threadirqs` is present (interrupt handlers run in threads).
    pub threadirqs: bool,
}

impl BootParams {
    /// Picks the parameters out of a command line; words after a lone `--` belong to
    /// init and are ignored. The last occurrence of a parameter wins, as in the kernel.
    pub fn parse(cmdline: &str) -> BootParams {
        let mut p = BootParams::default();
        for word in cmdline.split_whitespace().take_while(|w| *w != "--") {
            let (key, value) = match word.split_once('=') {
                Some((k, v)) => (k, Some(v.trim_matches('"').to_owned())),
                None => (word, None),
            };
            match key {
                "isolcpus" => p.isolcpus = value,
                "nohz_full" => p.nohz_full = value,
                "rcu_nocbs" => p.rcu_nocbs = value,
                "irqaffinity" => p.irqaffinity = value,
                "preempt" => p.preempt = value,
                "idle" => p.idle = value,
                "processor.max_cstate" | "intel_idle.max_cstate" => p.max_cstate = value,
                "threadirqs" => p.threadirqs = true,
                _ => {}
            }
        }
        p
    }
}

/// The real-time boot parameters of the running kernel.
pub fn boot_params() -> BootParams {
    BootParams::parse(&cmdline())
}

/// The kernel build configuration (`CONFIG_*` lines).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelConfig {
    /// Where it was read: `/proc/config.gz` or `/boot/config-<release>`.
    pub source: String,
    /// Every set option, `CONFIG_HZ` -> `250`, `CONFIG_PREEMPT_RT` -> `y`; string
    /// values without their quotes. Options that are "not set" are absent.
    pub options: BTreeMap<String, String>,
}

impl KernelConfig {
    /// The value of an option (`get("CONFIG_HZ")`), `None` when not set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(String::as_str)
    }
    /// Whether an option is built in or a module (`y` or `m`).
    pub fn enabled(&self, key: &str) -> bool {
        matches!(self.get(key), Some("y" | "m"))
    }
    /// The tick rate, `CONFIG_HZ`.
    pub fn hz(&self) -> Option<u32> {
        self.get("CONFIG_HZ")?.parse().ok()
    }
}

/// Parses the text of a kernel `.config`.
pub fn parse_kernel_config(text: &str, source: &str) -> KernelConfig {
    let options = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("CONFIG_"))
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            Some((k.trim().to_owned(), v.trim().trim_matches('"').to_owned()))
        })
        .collect();
    KernelConfig {
        source: source.to_owned(),
        options,
    }
}

/// The running kernel's build configuration, from `/proc/config.gz` or
/// `/boot/config-$(uname -r)`; `None` when neither is readable. Read once per process.
pub fn kernel_config() -> Option<KernelConfig> {
    static CONFIG: OnceLock<Option<KernelConfig>> = OnceLock::new();
    CONFIG.get_or_init(read_kernel_config).clone()
}

fn read_kernel_config() -> Option<KernelConfig> {
    if let Ok(file) = std::fs::File::open("/proc/config.gz") {
        let mut text = String::new();
        if flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .is_ok()
        {
            return Some(parse_kernel_config(&text, "/proc/config.gz"));
        }
    }
    let path = format!("/boot/config-{}", kernel().release);
    let text = std::fs::read_to_string(&path).ok()?;
    Some(parse_kernel_config(&text, &path))
}

/// The tick rate (`CONFIG_HZ`) from the kernel configuration.
pub fn hz() -> Option<u32> {
    kernel_config()?.hz()
}

/// The kernel's preemption model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PreemptModel {
    /// No forced preemption (server): kernel code runs until it yields.
    None,
    /// Voluntary preemption points (desktop).
    Voluntary,
    /// Full preemption of kernel code outside critical sections (low-latency desktop).
    Full,
    /// Lazy preemption (full for real-time tasks, deferred to the tick for others).
    Lazy,
    /// PREEMPT_RT: threaded interrupts, sleeping spinlocks.
    Rt,
    /// Could not be determined.
    Unknown,
}

impl fmt::Display for PreemptModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PreemptModel::None => "none",
            PreemptModel::Voluntary => "voluntary",
            PreemptModel::Full => "full",
            PreemptModel::Lazy => "lazy",
            PreemptModel::Rt => "rt",
            PreemptModel::Unknown => "unknown",
        })
    }
}

/// The preemption model in force and how it was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preemption {
    /// The model in force.
    pub model: PreemptModel,
    /// Whether the kernel is PREEMPT_DYNAMIC (the model is chosen at boot with
    /// `preempt=` or at run time through debugfs).
    pub dynamic: bool,
    /// Which source decided, such as `kernel log "Dynamic Preempt: none"`.
    pub source: String,
}

/// Maps a model name (`none`, `voluntary`, `full`, `lazy`, `rt`) to the model.
pub fn parse_preempt_choice(name: &str) -> PreemptModel {
    match name.trim().to_ascii_lowercase().as_str() {
        "none" => PreemptModel::None,
        "voluntary" => PreemptModel::Voluntary,
        "full" => PreemptModel::Full,
        "lazy" => PreemptModel::Lazy,
        "rt" => PreemptModel::Rt,
        _ => PreemptModel::Unknown,
    }
}

/// The bracketed choice of a sysfs/debugfs selector line: `none [voluntary] full` ->
/// `voluntary`.
pub fn parse_bracketed(line: &str) -> Option<&str> {
    let start = line.find('[')? + 1;
    let len = line[start..].find(']')?;
    let chosen = line[start..start + len].trim();
    (!chosen.is_empty()).then_some(chosen)
}

/// The model of the last `Dynamic Preempt: <model>` line of a kernel log.
pub fn parse_dynamic_preempt_log(log: &str) -> Option<PreemptModel> {
    log.lines().rev().find_map(|line| {
        let rest = &line[line.find("Dynamic Preempt:")? + "Dynamic Preempt:".len()..];
        let model = parse_preempt_choice(rest.split_whitespace().next()?);
        (model != PreemptModel::Unknown).then_some(model)
    })
}

/// What each source said; gathered by [`preemption`], decided by [`decide_preemption`].
#[derive(Debug, Default)]
struct PreemptSources {
    /// `/sys/kernel/realtime`.
    realtime: Option<String>,
    /// `/sys/kernel/debug/sched/preempt`.
    debugfs: Option<String>,
    /// The kernel log (dmesg).
    kernel_log: Option<String>,
    /// `/proc/cmdline`.
    cmdline: String,
    /// The kernel configuration.
    config: Option<KernelConfig>,
    /// `uname -v`.
    uname_version: String,
}

/// The preemption model of the running kernel. Sources, first that answers wins:
/// `/sys/kernel/realtime`, `/sys/kernel/debug/sched/preempt`, the kernel log line
/// `Dynamic Preempt: ...` (needs privilege), `preempt=` on the command line of a
/// PREEMPT_DYNAMIC kernel, the kernel configuration, then `uname -v`.
pub fn preemption() -> Preemption {
    let sources = PreemptSources {
        realtime: read_trimmed("/sys/kernel/realtime"),
        debugfs: read_trimmed("/sys/kernel/debug/sched/preempt"),
        kernel_log: kernel_log(),
        cmdline: cmdline(),
        config: kernel_config(),
        uname_version: kernel().version,
    };
    decide_preemption(&sources)
}

fn decide_preemption(s: &PreemptSources) -> Preemption {
    let config = s.config.as_ref();
    let version_words: Vec<&str> = s.uname_version.split_whitespace().collect();
    let dynamic = config.is_some_and(|c| c.enabled("CONFIG_PREEMPT_DYNAMIC"))
        || version_words.contains(&"PREEMPT_DYNAMIC")
        || s.debugfs.is_some();
    let found = |model, dynamic, source: String| Preemption {
        model,
        dynamic,
        source,
    };
    if s.realtime.as_deref() == Some("1") {
        return found(PreemptModel::Rt, dynamic, "/sys/kernel/realtime = 1".into());
    }
    if let Some(choice) = s.debugfs.as_deref().and_then(parse_bracketed) {
        let model = parse_preempt_choice(choice);
        if model != PreemptModel::Unknown {
            return found(
                model,
                true,
                format!("/sys/kernel/debug/sched/preempt [{choice}]"),
            );
        }
    }
    if let Some(model) = s.kernel_log.as_deref().and_then(parse_dynamic_preempt_log) {
        return found(
            model,
            true,
            format!("kernel log \"Dynamic Preempt: {model}\""),
        );
    }
    if dynamic
        && let Some(choice) = BootParams::parse(&s.cmdline).preempt
        && parse_preempt_choice(&choice) != PreemptModel::Unknown
    {
        return found(
            parse_preempt_choice(&choice),
            true,
            format!("/proc/cmdline preempt={choice}"),
        );
    }
    if let Some(c) = config {
        let model = if c.enabled("CONFIG_PREEMPT_RT") {
            Some(PreemptModel::Rt)
        } else if c.enabled("CONFIG_PREEMPT_LAZY") {
            Some(PreemptModel::Lazy)
        } else if c.enabled("CONFIG_PREEMPT") {
            Some(PreemptModel::Full)
        } else if c.enabled("CONFIG_PREEMPT_VOLUNTARY") {
            Some(PreemptModel::Voluntary)
        } else if c.enabled("CONFIG_PREEMPT_NONE") {
            Some(PreemptModel::None)
        } else {
            None
        };
        if let Some(model) = model {
            let note = if dynamic {
                ", the PREEMPT_DYNAMIC boot default"
            } else {
                ""
            };
            return found(model, dynamic, format!("{}{note}", c.source));
        }
    }
    let source = "uname -v".to_owned();
    if version_words.contains(&"PREEMPT_RT") {
        found(PreemptModel::Rt, dynamic, source)
    } else if version_words.contains(&"PREEMPT_DYNAMIC") {
        found(
            PreemptModel::Unknown,
            true,
            "uname -v (PREEMPT_DYNAMIC, mode not readable)".into(),
        )
    } else if version_words.contains(&"PREEMPT_LAZY") {
        found(PreemptModel::Lazy, dynamic, source)
    } else if version_words.contains(&"PREEMPT") {
        found(PreemptModel::Full, dynamic, source)
    } else {
        found(
            PreemptModel::Unknown,
            dynamic,
            "uname -v (no PREEMPT flag: none or voluntary)".into(),
        )
    }
}

/// The kernel log ring buffer (`klogctl(SYSLOG_ACTION_READ_ALL)`); `None` without
/// privilege (CAP_SYSLOG, or `kernel.dmesg_restrict` = 0).
fn kernel_log() -> Option<String> {
    const SYSLOG_ACTION_READ_ALL: libc::c_int = 3;
    const SYSLOG_ACTION_SIZE_BUFFER: libc::c_int = 10;
    // SAFETY: SIZE_BUFFER ignores the buffer arguments; a null pointer with length 0
    // is what the man page prescribes.
    let size = unsafe { libc::klogctl(SYSLOG_ACTION_SIZE_BUFFER, std::ptr::null_mut(), 0) };
    let size = usize::try_from(size).ok().filter(|&s| s > 0)?.min(64 << 20);
    let mut buf = vec![0u8; size];
    let len = libc::c_int::try_from(buf.len()).ok()?;
    // SAFETY: the pointer and length describe `buf`, which lives across the call; the
    // kernel writes at most `len` bytes.
    let n = unsafe { libc::klogctl(SYSLOG_ACTION_READ_ALL, buf.as_mut_ptr().cast(), len) };
    let n = usize::try_from(n).ok()?;
    buf.truncate(n);
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// The kernel's clocksource, in use and available.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clocksource {
    /// The one in use, such as `tsc`.
    pub current: Option<String>,
    /// All that the kernel could switch to, such as `tsc`, `kvm-clock`, `hpet`.
    pub available: Vec<String>,
}

/// The clocksource from `/sys/devices/system/clocksource/clocksource0`.
pub fn clocksource() -> Clocksource {
    let base = "/sys/devices/system/clocksource/clocksource0";
    Clocksource {
        current: read_trimmed(format!("{base}/current_clocksource")).filter(|s| !s.is_empty()),
        available: read_trimmed(format!("{base}/available_clocksource"))
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
    }
}

/// The ftrace tracers the kernel offers (`available_tracers` in tracefs, at
/// `/sys/kernel/tracing` or `/sys/kernel/debug/tracing`); `None` when tracefs is not
/// mounted or not readable.
pub fn tracers() -> Option<Vec<String>> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|dir| read_trimmed(format!("{dir}/available_tracers")))
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bracketed_entry_is_the_one_in_force() {
        assert_eq!(parse_bracketed("none [voluntary] full"), Some("voluntary"));
        assert_eq!(parse_bracketed("[none] voluntary full lazy"), Some("none"));
        assert_eq!(parse_bracketed("always [madvise] never\n"), Some("madvise"));
        assert_eq!(parse_bracketed("none voluntary full"), None);
        assert_eq!(parse_bracketed("[]"), None);
    }

    #[test]
    fn the_dynamic_preempt_line_is_found_in_a_kernel_log() {
        let log = "<6>[    0.000000] Linux version 6.18\n<6>[    0.135683] Dynamic Preempt: none\n<6>[    0.135756] rcu: Preemptible hierarchical RCU implementation.\n";
        assert_eq!(parse_dynamic_preempt_log(log), Some(PreemptModel::None));
        assert_eq!(parse_dynamic_preempt_log("nothing here"), None);
    }

    #[test]
    fn config_lines_become_options_and_not_set_lines_are_skipped() {
        let text = "# comment\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n# CONFIG_PREEMPT is not set\nCONFIG_LOCALVERSION=\"-rt\"\nCONFIG_KVM=m\n";
        let sut = parse_kernel_config(text, "test");
        assert_eq!(sut.hz(), Some(250));
        assert_eq!(sut.get("CONFIG_LOCALVERSION"), Some("-rt"));
        assert!(sut.enabled("CONFIG_HZ_250"));
        assert!(sut.enabled("CONFIG_KVM"));
        assert!(!sut.enabled("CONFIG_PREEMPT"));
        assert_eq!(sut.options.len(), 4);
    }

    #[test]
    fn boot_parameters_after_the_init_separator_are_ignored() {
        let sut = BootParams::parse(
            "console=ttyS0 isolcpus=domain,managed_irq,2-3 nohz_full=2-3 threadirqs -- preempt=full",
        );
        assert_eq!(sut.isolcpus.as_deref(), Some("domain,managed_irq,2-3"));
        assert_eq!(sut.nohz_full.as_deref(), Some("2-3"));
        assert!(sut.threadirqs);
        assert_eq!(sut.preempt, None);
        assert_eq!(sut.rcu_nocbs, None);
    }

    fn config(lines: &str) -> Option<KernelConfig> {
        Some(parse_kernel_config(lines, "/proc/config.gz"))
    }

    #[test]
    fn the_kernel_log_beats_the_config_default_of_a_dynamic_kernel() {
        let sources = PreemptSources {
            kernel_log: Some("[0.1] Dynamic Preempt: none\n".into()),
            config: config("CONFIG_PREEMPT=y\nCONFIG_PREEMPT_DYNAMIC=y\n"),
            uname_version: "#1 SMP PREEMPT_DYNAMIC".into(),
            ..Default::default()
        };
        let sut = decide_preemption(&sources);
        assert_eq!(sut.model, PreemptModel::None);
        assert!(sut.dynamic);
        assert!(sut.source.contains("kernel log"), "{}", sut.source);
    }

    #[test]
    fn sys_kernel_realtime_wins_over_everything() {
        let sources = PreemptSources {
            realtime: Some("1".into()),
            debugfs: Some("none [full]".into()),
            ..Default::default()
        };
        assert_eq!(decide_preemption(&sources).model, PreemptModel::Rt);
    }

    #[test]
    fn debugfs_beats_the_kernel_log() {
        let sources = PreemptSources {
            debugfs: Some("none voluntary [full] lazy".into()),
            kernel_log: Some("Dynamic Preempt: none".into()),
            ..Default::default()
        };
        let sut = decide_preemption(&sources);
        assert_eq!(sut.model, PreemptModel::Full);
        assert!(sut.dynamic);
    }

    #[test]
    fn the_boot_parameter_decides_a_dynamic_kernel_without_a_log() {
        let sources = PreemptSources {
            cmdline: "quiet preempt=full".into(),
            config: config("CONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y\n"),
            ..Default::default()
        };
        let sut = decide_preemption(&sources);
        assert_eq!(sut.model, PreemptModel::Full);
        assert_eq!(sut.source, "/proc/cmdline preempt=full");
    }

    #[test]
    fn the_config_decides_when_nothing_else_answers() {
        let sources = PreemptSources {
            config: config("CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPT=y\n"),
            ..Default::default()
        };
        let sut = decide_preemption(&sources);
        assert_eq!(sut.model, PreemptModel::Rt);
        assert!(!sut.dynamic);
        assert_eq!(sut.source, "/proc/config.gz");
    }

    #[test]
    fn uname_is_the_last_resort() {
        let rt = PreemptSources {
            uname_version: "#1 SMP PREEMPT_RT Fri".into(),
            ..Default::default()
        };
        assert_eq!(decide_preemption(&rt).model, PreemptModel::Rt);
        let full = PreemptSources {
            uname_version: "#1 SMP PREEMPT Fri".into(),
            ..Default::default()
        };
        assert_eq!(decide_preemption(&full).model, PreemptModel::Full);
        let plain = PreemptSources {
            uname_version: "#1 SMP Fri".into(),
            ..Default::default()
        };
        assert_eq!(decide_preemption(&plain).model, PreemptModel::Unknown);
    }

    #[test]
    fn preempt_models_display_as_their_boot_parameter_names() {
        let sut = [
            PreemptModel::None,
            PreemptModel::Voluntary,
            PreemptModel::Full,
        ];
        let names: Vec<String> = sut.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["none", "voluntary", "full"]);
        assert_eq!(parse_preempt_choice("Lazy"), PreemptModel::Lazy);
    }

    #[test]
    fn the_running_kernel_has_a_release_and_a_preemption_source() {
        let sut = kernel();
        assert!(!sut.release.is_empty());
        assert!(!preemption().source.is_empty());
    }
}
