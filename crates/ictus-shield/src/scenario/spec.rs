//! The scenario file: TOML read with serde, every key known, every value checked, and
//! every refusal pointing at the file, line and column of the offending key.
//!
//! ```
//! use std::path::Path;
//! use ictus_core::CpuSet;
//! use ictus_shield::scenario::spec;
//! let text = r#"
//! name = "two groups"
//! rt_cpus = "1"
//!
//! [[group]]
//! name = "linux"
//! count = 2
//! loops = 1000
//!
//! [[group]]
//! name = "rt"
//! class = "rt1"
//! priority = 50
//! loops = 1000
//! sloop = 100
//! section = "5us"
//! "#;
//! let machine: CpuSet = "0-1".parse().unwrap();
//! let scenario = spec::parse(text, Path::new("two.toml"), &machine).unwrap();
//! assert_eq!(scenario.tasks(), 3);
//! let bad = text.replace("loops = 1000\n\n[[group]]", "loop = 1000\n\n[[group]]");
//! let err = spec::parse(&bad, Path::new("two.toml"), &machine).unwrap_err();
//! assert!(err.to_string().starts_with("two.toml:8:1: unknown field `loop`"), "{err}");
//! ```

use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use ictus_core::CpuSet;
use ictus_os::fs::Located;
use ictus_os::{facts, sched};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use thiserror::Error;
use toml::Spanned;

use crate::class::RtPolicy;

/// Sampling period when the file names none.
pub const DEFAULT_SAMPLE_PERIOD: Duration = Duration::from_millis(1);
/// Shortest sampling period accepted: each sample reads every task's stat file.
pub const MIN_SAMPLE_PERIOD: Duration = Duration::from_micros(100);
/// Timeline bucket width when the file names none.
pub const DEFAULT_TIMELINE_BUCKET: Duration = Duration::from_millis(20);
/// The most tasks a scenario may start, all groups together: each is a thread with
/// its own stat file read every sample.
pub const MAX_TASKS: u32 = 4096;

/// A scenario, checked: groups of fake tasks that start together (seed 002 §5.3.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// What it shows, in words.
    #[serde(default)]
    pub description: String,
    /// The RT CPUs of the logical partition; the other CPUs in play are NRT.
    pub rt_cpus: CpuSet,
    /// A safety stop: tasks still running then are stopped and the result is marked
    /// incomplete.
    #[serde(
        rename = "duration_limit_ns",
        with = "opt_ns",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub duration_limit: Option<Duration>,
    /// How often the sampler reads every task's state and CPU.
    #[serde(rename = "sample_period_ns", with = "ns")]
    pub sample_period: Duration,
    /// Width of the timeline's buckets (mean running tasks per bucket).
    #[serde(rename = "timeline_bucket_ns", with = "ns")]
    pub timeline_bucket: Duration,
    /// The groups of tasks, in file order.
    pub groups: Vec<TaskGroup>,
}

/// A group of identical fake tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskGroup {
    /// Its name (unique in the scenario).
    pub name: String,
    /// How many tasks.
    pub count: u32,
    /// The CPUs its tasks may run on (as written; a run uses those it may use).
    pub cpus: CpuSet,
    /// The class its tasks enter.
    pub class: GroupClass,
    /// The compute amount of each task, in loops (see [`super::run::one_loop`]).
    pub loops: u64,
    /// Sleeps: every `loops` loops, sleep `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep: Option<Every>,
    /// Sections that endanger latency (seed 002's `sloop`): every `loops` loops, a
    /// migration attempt, then `duration` of busy work inside the section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<Every>,
}

/// Something done every so many loops, lasting a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Every {
    /// Loops between two occurrences.
    pub loops: u64,
    /// How long each lasts.
    #[serde(rename = "duration_ns", with = "ns")]
    pub duration: Duration,
}

/// The class of a group's tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "lowercase")]
pub enum GroupClass {
    /// `SCHED_OTHER`: ARTiS's "Linux tasks".
    Normal,
    /// FIFO 99, one task per RT CPU of the group's `cpus`.
    Rt0,
    /// FIFO or RR at 1 to 98, movable.
    Rt1 {
        /// FIFO or RR.
        policy: RtPolicy,
        /// 1 to 98.
        priority: u8,
    },
}

impl GroupClass {
    /// The class as the file writes it: `normal`, `rt0`, `rt1`.
    pub fn name(&self) -> &'static str {
        match self {
            GroupClass::Normal => "normal",
            GroupClass::Rt0 => "rt0",
            GroupClass::Rt1 { .. } => "rt1",
        }
    }
}

impl fmt::Display for GroupClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupClass::Normal => f.write_str("normal"),
            GroupClass::Rt0 => f.write_str("RT0 (fifo 99)"),
            GroupClass::Rt1 { policy, priority } => {
                write!(f, "RT{priority} ({})", policy.at(*priority))
            }
        }
    }
}

impl Scenario {
    /// How many tasks in all.
    pub fn tasks(&self) -> u32 {
        // At most MAX_TASKS once checked; saturating for a scenario built by hand.
        self.groups
            .iter()
            .fold(0u32, |n, g| n.saturating_add(g.count))
    }

    /// The scenario as a file that [`parse`] reads back to the same scenario.
    pub fn to_toml(&self) -> String {
        let file = ScenarioFile {
            name: self.name.clone(),
            description: self.description.clone(),
            rt_cpus: unspanned(CpuList(self.rt_cpus.clone())),
            duration_limit: self.duration_limit.map(|d| unspanned(DurationText(d))),
            sample_period: Some(unspanned(DurationText(self.sample_period))),
            timeline_bucket: Some(unspanned(DurationText(self.timeline_bucket))),
            groups: self
                .groups
                .iter()
                .map(|g| GroupFile {
                    name: unspanned(g.name.clone()),
                    count: Some(unspanned(g.count)),
                    cpus: Some(unspanned(CpuList(g.cpus.clone()))),
                    cpu_mask: None,
                    class: Some(unspanned(match g.class {
                        GroupClass::Normal => ClassName::Normal,
                        GroupClass::Rt0 => ClassName::Rt0,
                        GroupClass::Rt1 { .. } => ClassName::Rt1,
                    })),
                    policy: match g.class {
                        GroupClass::Rt1 { policy, .. } => Some(unspanned(policy)),
                        _ => None,
                    },
                    priority: match g.class {
                        GroupClass::Rt1 { priority, .. } => Some(unspanned(priority)),
                        _ => None,
                    },
                    loops: unspanned(g.loops),
                    sleep_every: g.sleep.map(|e| unspanned(e.loops)),
                    sleep: g.sleep.map(|e| unspanned(DurationText(e.duration))),
                    sloop: g.section.map(|e| unspanned(e.loops)),
                    section: g.section.map(|e| unspanned(DurationText(e.duration))),
                })
                .collect(),
        };
        toml::to_string(&file).unwrap_or_else(|e| format!("# not written: {e}\n"))
    }
}

/// Why a scenario file was refused. Nothing was started.
#[derive(Debug, Error)]
pub enum SpecError {
    /// The file could not be read: missing, not a regular file (a FIFO would block),
    /// too large, or not UTF-8 (with the line and column of the first bad byte).
    #[error(transparent)]
    Read(#[from] ictus_os::fs::InputError),
    /// The file is not a valid scenario.
    #[error(transparent)]
    Invalid(ictus_os::fs::Located<String>),
}

/// The CPUs a run may use: online, and allowed to this process (a `taskset` or a
/// cpuset around it narrows them).
pub fn machine_cpus() -> CpuSet {
    let online = facts::online_cpus();
    match sched::current_affinity() {
        Ok(allowed) => {
            let both = CpuSet::from_cpus(
                online
                    .cpus()
                    .iter()
                    .copied()
                    .filter(|&c| allowed.contains(c)),
            );
            if both.is_empty() { online } else { both }
        }
        Err(_) => online,
    }
}

/// Reads and checks the scenario file at `path` against the CPUs this run may use.
pub fn load(path: &Path) -> Result<Scenario, SpecError> {
    let text = ictus_os::fs::read_input(path, ictus_os::fs::InputKind::Scenario.max_bytes())?;
    parse(&text, path, &machine_cpus())
}

/// Checks the scenario `text` (read from `path`, named in errors) against `machine`,
/// the CPUs a run may use.
pub fn parse(text: &str, path: &Path, machine: &CpuSet) -> Result<Scenario, SpecError> {
    let invalid = |span: Option<Range<usize>>, message: String| {
        SpecError::Invalid(Located::at(
            path.display().to_string(),
            text,
            span.map_or(0, |s| s.start),
            message,
        ))
    };
    let file: ScenarioFile =
        toml::from_str(text).map_err(|e| invalid(e.span(), plain(e.message())))?;
    check(file, machine).map_err(|(span, message)| invalid(Some(span), message))
}

/// serde's message in words a scenario's author uses: `expected u64` becomes
/// `expected a whole number (0 or more)`.
fn plain(message: &str) -> String {
    let mut m = message.trim().to_string();
    for (rust, words) in [
        ("u8", "a whole number from 0 to 255"),
        ("u32", "a whole number (0 or more)"),
        ("u64", "a whole number (0 or more)"),
    ] {
        if let Some(head) = m.strip_suffix(&format!("expected {rust}")) {
            m = format!("{head}expected {words}");
        }
    }
    m
}

type Refusal = (Range<usize>, String);

fn refuse<T, V>(at: &Spanned<V>, message: impl Into<String>) -> Result<T, Refusal> {
    Err((at.span(), message.into()))
}

fn positive(d: &Spanned<DurationText>, key: &str) -> Result<Duration, Refusal> {
    let v = d.get_ref().0;
    if v.is_zero() {
        return refuse(
            d,
            format!("expected a positive duration for `{key}`, like \"1ms\", found 0"),
        );
    }
    Ok(v)
}

/// Intersection of `a` and `b`.
fn both(a: &CpuSet, b: &CpuSet) -> CpuSet {
    CpuSet::from_cpus(a.cpus().iter().copied().filter(|&c| b.contains(c)))
}

/// The scenario of `file`, every key checked in file order: the partition, the
/// timing, then each group.
fn check(file: ScenarioFile, machine: &CpuSet) -> Result<Scenario, Refusal> {
    let rt = check_rt_cpus(&file.rt_cpus, machine)?;
    let duration_limit = file
        .duration_limit
        .as_ref()
        .map(|d| positive(d, "duration_limit"))
        .transpose()?;
    let sample_period = check_sample_period(file.sample_period.as_ref())?;
    let timeline_bucket = check_timeline_bucket(file.timeline_bucket.as_ref(), sample_period)?;
    let mut groups = Vec::with_capacity(file.groups.len());
    let mut tasks = 0u32;
    for g in file.groups {
        let group = check_group(g, &groups, tasks, rt, machine)?;
        tasks = tasks.saturating_add(group.count);
        groups.push(group);
    }
    if groups.is_empty() {
        return Err((0..0, "expected at least one [[group]]".to_string()));
    }
    Ok(Scenario {
        name: file.name,
        description: file.description,
        rt_cpus: rt.clone(),
        duration_limit,
        sample_period,
        timeline_bucket,
        groups,
    })
}

/// `rt_cpus`: not empty, all of them CPUs this run may use, and not all of those.
fn check_rt_cpus<'a>(
    rt_cpus: &'a Spanned<CpuList>,
    machine: &CpuSet,
) -> Result<&'a CpuSet, Refusal> {
    let rt = &rt_cpus.get_ref().0;
    if rt.is_empty() {
        return refuse(
            rt_cpus,
            "expected at least one RT CPU in `rt_cpus`, like \"1\"",
        );
    }
    if let Some(cpu) = rt.cpus().iter().find(|&&c| !machine.contains(c)) {
        return refuse(
            rt_cpus,
            format!(
                "expected RT CPUs this run may use ({machine}), found {rt}: CPU {cpu} is not online or not allowed"
            ),
        );
    }
    if machine.cpus().iter().all(|&c| rt.contains(c)) {
        return refuse(
            rt_cpus,
            format!(
                "expected `rt_cpus` to leave at least one NRT CPU, found {rt} (CPUs this run may use: {machine})"
            ),
        );
    }
    Ok(rt)
}

/// `sample_period`, at least [`MIN_SAMPLE_PERIOD`]; the default when absent.
fn check_sample_period(d: Option<&Spanned<DurationText>>) -> Result<Duration, Refusal> {
    let Some(d) = d else {
        return Ok(DEFAULT_SAMPLE_PERIOD);
    };
    let v = positive(d, "sample_period")?;
    if v < MIN_SAMPLE_PERIOD {
        return refuse(
            d,
            "expected a `sample_period` of at least 100us (each sample reads every task's stat file)",
        );
    }
    Ok(v)
}

/// `timeline_bucket`, at least `sample_period`; when absent, the default or
/// `sample_period` if longer.
fn check_timeline_bucket(
    d: Option<&Spanned<DurationText>>,
    sample_period: Duration,
) -> Result<Duration, Refusal> {
    let Some(d) = d else {
        return Ok(DEFAULT_TIMELINE_BUCKET.max(sample_period));
    };
    let v = positive(d, "timeline_bucket")?;
    if v < sample_period {
        return refuse(
            d,
            "expected a `timeline_bucket` at least as long as `sample_period`",
        );
    }
    Ok(v)
}

/// One `[[group]]`, after the `groups` before it (`tasks` tasks in all), in the
/// order its keys are checked: name, count, CPUs, class, the class's CPUs, loops,
/// sleeps and sections.
fn check_group(
    g: GroupFile,
    groups: &[TaskGroup],
    tasks: u32,
    rt: &CpuSet,
    machine: &CpuSet,
) -> Result<TaskGroup, Refusal> {
    let name = g.name.get_ref().trim().to_string();
    if name.is_empty() {
        return refuse(&g.name, "expected a group name, found an empty string");
    }
    if groups.iter().any(|x: &TaskGroup| x.name == name) {
        return refuse(
            &g.name,
            format!("expected a unique group name, found a second `{name}`"),
        );
    }
    let count = check_count(&g, tasks)?;
    let class_name = g.class.as_ref().map_or(ClassName::Normal, |c| *c.get_ref());
    let cpus = check_group_cpus(&g, machine)?;
    let class = check_class(&g, class_name)?;
    let cpus = class_cpus(&g, class, cpus, count, rt, machine)?;
    if *g.loops.get_ref() == 0 {
        return refuse(&g.loops, "expected `loops` of at least 1, found 0");
    }
    let sleep = every(&g.sleep_every, &g.sleep, ("sleep_every", "sleep"))?;
    let section = every(&g.sloop, &g.section, ("sloop", "section"))?;
    Ok(TaskGroup {
        name,
        count,
        cpus,
        class,
        loops: *g.loops.get_ref(),
        sleep,
        section,
    })
}

/// The group's `count` (1 when absent): at least 1, and at most what is left of
/// [`MAX_TASKS`] after the `tasks` of the groups before it.
fn check_count(g: &GroupFile, tasks: u32) -> Result<u32, Refusal> {
    let count = match &g.count {
        Some(c) if *c.get_ref() == 0 => {
            return refuse(c, "expected a `count` of at least 1, found 0");
        }
        Some(c) => *c.get_ref(),
        None => 1,
    };
    let total = tasks.saturating_add(count);
    if total > MAX_TASKS {
        let at = g.count.as_ref().map_or(g.name.span(), |c| c.span());
        return Err((
            at,
            format!(
                "expected at most {MAX_TASKS} tasks in all groups together, found {total} with this group's count of {count}"
            ),
        ));
    }
    Ok(count)
}

/// The group's `cpus` or `cpu_mask` (not both) with its span, when given: at least
/// one of them a CPU this run may use.
fn check_group_cpus(
    g: &GroupFile,
    machine: &CpuSet,
) -> Result<Option<(Range<usize>, CpuSet)>, Refusal> {
    let cpus = match (&g.cpus, &g.cpu_mask) {
        (Some(_), Some(mask)) => {
            return refuse(mask, "expected `cpus` or `cpu_mask`, not both");
        }
        (Some(c), None) => Some((c.span(), c.get_ref().0.clone(), "cpus")),
        (None, Some(m)) => Some((m.span(), m.get_ref().0.clone(), "cpu_mask")),
        (None, None) => None,
    };
    let Some((span, set, key)) = cpus else {
        return Ok(None);
    };
    if both(&set, machine).is_empty() {
        return Err((
            span,
            format!(
                "expected `{key}` to name at least one online CPU this run may use ({machine}), found {}",
                if set.is_empty() {
                    "none".to_string()
                } else {
                    set.to_string()
                }
            ),
        ));
    }
    Ok(Some((span, set)))
}

/// The group's class: `policy` and `priority` only for rt1, which needs a priority
/// from 1 to 98.
fn check_class(g: &GroupFile, class_name: ClassName) -> Result<GroupClass, Refusal> {
    match class_name {
        ClassName::Normal | ClassName::Rt0 => {
            if let Some(p) = &g.policy {
                return refuse(
                    p,
                    format!(
                        "`policy` is for rt1 groups; a {} group runs {}",
                        class_name.name(),
                        if class_name == ClassName::Rt0 {
                            "fifo 99"
                        } else {
                            "SCHED_OTHER"
                        }
                    ),
                );
            }
            if let Some(p) = &g.priority {
                return refuse(
                    p,
                    format!("`priority` is for rt1 groups, not {}", class_name.name()),
                );
            }
            if class_name == ClassName::Rt0 {
                Ok(GroupClass::Rt0)
            } else {
                Ok(GroupClass::Normal)
            }
        }
        ClassName::Rt1 => {
            let Some(priority) = &g.priority else {
                let at = g.class.as_ref().map_or(g.name.span(), |c| c.span());
                return Err((
                    at,
                    "expected `priority` (1 to 98) for an rt1 group".to_string(),
                ));
            };
            if !(1..=98).contains(priority.get_ref()) {
                return refuse(
                    priority,
                    format!(
                        "expected an rt1 priority from 1 to 98 (99 is RT0's), found {}",
                        priority.get_ref()
                    ),
                );
            }
            Ok(GroupClass::Rt1 {
                policy: g.policy.as_ref().map_or(RtPolicy::Fifo, |p| *p.get_ref()),
                priority: *priority.get_ref(),
            })
        }
    }
}

/// The CPUs of a group of `class` with `count` tasks: those given (`cpus`, with
/// their span) or, when none are, the RT CPUs for rt0 and the machine's for the
/// others. An rt0 group needs one usable RT CPU per task and no other CPU.
fn class_cpus(
    g: &GroupFile,
    class: GroupClass,
    cpus: Option<(Range<usize>, CpuSet)>,
    count: u32,
    rt: &CpuSet,
    machine: &CpuSet,
) -> Result<CpuSet, Refusal> {
    match (class, cpus) {
        (GroupClass::Rt0, Some((span, set))) => {
            let usable = both(&set, machine);
            if let Some(cpu) = usable.cpus().iter().find(|&&c| !rt.contains(c)) {
                return Err((
                    span,
                    format!("expected RT CPUs (rt_cpus = {rt}) for an rt0 group, found CPU {cpu}"),
                ));
            }
            if usable.len() < count as usize {
                return Err((
                    span,
                    format!(
                        "expected one RT CPU per rt0 task: count is {count}, but only {} of {set} can be used",
                        usable.len()
                    ),
                ));
            }
            Ok(set)
        }
        (GroupClass::Rt0, None) => {
            if rt.len() < count as usize {
                let at = g.count.as_ref().map_or(g.name.span(), |c| c.span());
                return Err((
                    at,
                    format!(
                        "expected one RT CPU per rt0 task: count is {count}, but rt_cpus has {}",
                        rt.len()
                    ),
                ));
            }
            Ok(rt.clone())
        }
        (_, Some((_, set))) => Ok(set),
        (_, None) => Ok(machine.clone()),
    }
}

/// `every` loops, something lasting `duration`: both keys or neither.
fn every(
    every: &Option<Spanned<u64>>,
    duration: &Option<Spanned<DurationText>>,
    (every_key, duration_key): (&str, &str),
) -> Result<Option<Every>, Refusal> {
    match (every, duration) {
        (None, None) => Ok(None),
        (Some(e), None) => refuse(
            e,
            format!("expected `{duration_key}` with `{every_key}` (how long each one lasts)"),
        ),
        (None, Some(d)) => refuse(
            d,
            format!("expected `{every_key}` with `{duration_key}` (every how many loops)"),
        ),
        (Some(e), Some(d)) => {
            if *e.get_ref() == 0 {
                return refuse(e, format!("expected `{every_key}` of at least 1, found 0"));
            }
            Ok(Some(Every {
                loops: *e.get_ref(),
                duration: positive(d, duration_key)?,
            }))
        }
    }
}

fn unspanned<T>(value: T) -> Spanned<T> {
    Spanned::new(0..0, value)
}

// ---- The file form: what a person writes. ----

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    description: String,
    rt_cpus: Spanned<CpuList>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    duration_limit: Option<Spanned<DurationText>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sample_period: Option<Spanned<DurationText>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeline_bucket: Option<Spanned<DurationText>>,
    #[serde(rename = "group")]
    groups: Vec<GroupFile>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupFile {
    name: Spanned<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    count: Option<Spanned<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpus: Option<Spanned<CpuList>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_mask: Option<Spanned<CpuMask>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    class: Option<Spanned<ClassName>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<Spanned<RtPolicy>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    priority: Option<Spanned<u8>>,
    loops: Spanned<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sleep_every: Option<Spanned<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sleep: Option<Spanned<DurationText>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sloop: Option<Spanned<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    section: Option<Spanned<DurationText>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ClassName {
    Normal,
    Rt0,
    Rt1,
}

impl ClassName {
    fn name(self) -> &'static str {
        match self {
            ClassName::Normal => "normal",
            ClassName::Rt0 => "rt0",
            ClassName::Rt1 => "rt1",
        }
    }
}

/// A CPU list in the kernel's format: `"0-3,6"`.
#[derive(Debug)]
struct CpuList(CpuSet);

impl Serialize for CpuList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = CpuList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a CPU list like \"0-3,6\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CpuList, E> {
                v.parse().map(CpuList).map_err(|e| {
                    E::custom(format!(
                        "expected a CPU list like \"0-3,6\", found \"{v}\": {e}"
                    ))
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// A CPU mask: an integer (`0xf`, TOML's hexadecimal) or a string `"0xf"`.
#[derive(Debug)]
struct CpuMask(CpuSet);

impl Serialize for CpuMask {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut words = vec![0u64; self.0.cpus().last().map_or(1, |&c| c / 64 + 1)];
        for &c in self.0.cpus() {
            words[c / 64] |= 1 << (c % 64);
        }
        let hex: String = words.iter().rev().map(|w| format!("{w:016x}")).collect();
        let hex = hex.trim_start_matches('0');
        s.collect_str(&format_args!(
            "0x{}",
            if hex.is_empty() { "0" } else { hex }
        ))
    }
}

impl<'de> Deserialize<'de> for CpuMask {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = CpuMask;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a CPU mask like 0xf or \"0xf\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<CpuMask, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("expected a CPU mask like 0xf, found {v}")))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<CpuMask, E> {
                Ok(CpuMask(CpuSet::from_cpus(
                    (0..64).filter(|b| v & (1 << b) != 0),
                )))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CpuMask, E> {
                let bad = || E::custom(format!("expected a CPU mask like \"0xf\", found \"{v}\""));
                let t = v.trim();
                let hex = t
                    .strip_prefix("0x")
                    .or_else(|| t.strip_prefix("0X"))
                    .unwrap_or(t)
                    .replace([',', '_'], "");
                if hex.is_empty() || hex.len() > ictus_core::cpulist::MAX_CPU.div_ceil(4) + 1 {
                    return Err(bad());
                }
                let mut cpus = Vec::new();
                for (i, ch) in hex.chars().rev().enumerate() {
                    let nibble = ch.to_digit(16).ok_or_else(bad)?;
                    cpus.extend((0..4).filter(|b| nibble & (1 << b) != 0).map(|b| i * 4 + b));
                }
                Ok(CpuMask(CpuSet::from_cpus(cpus)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration with its unit: `"1ms"`, `"250us"`, `"1.5s"`, `"2min"`.
#[derive(Debug, Clone, Copy)]
struct DurationText(Duration);

impl Serialize for DurationText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_duration(self.0))
    }
}

impl<'de> Deserialize<'de> for DurationText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DurationText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration with its unit, like \"1ms\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationText, E> {
                parse_duration(v).map(DurationText).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// Parses `"1ms"`, `"250 us"`, `"1.5s"`, `"2min"`; refuses negative ones and bare
/// numbers.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!(
            "expected a positive duration like \"{}\", found \"{text}\"",
            t.trim_start_matches('-').trim()
        ));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(t.len());
    let (num, unit) = (t[..split].trim_start_matches('+'), t[split..].trim());
    let scale: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        _ => {
            return Err(format!(
                "expected a duration with a unit (ns, us, ms, s, min), like \"1ms\", found \"{text}\""
            ));
        }
    };
    let value: f64 = num.parse().map_err(|_| {
        format!(
            "expected a duration with a unit (ns, us, ms, s, min), like \"1ms\", found \"{text}\""
        )
    })?;
    let ns = value * scale;
    if !ns.is_finite() || ns > u64::MAX as f64 / 2.0 {
        return Err(format!(
            "expected a duration under a century, found \"{text}\""
        ));
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// `1ms`, `1500us`, `2s`: the largest unit that writes `d` exactly.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, scale) in [("s", 1_000_000_000u128), ("ms", 1_000_000), ("us", 1_000)] {
        if ns >= scale && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// `Duration` as integer nanoseconds.
mod ns {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_nanos() as u64)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_nanos)
    }
}

/// `Option<Duration>` as integer nanoseconds.
mod opt_ns {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_nanos() as u64)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Option::<u64>::deserialize(d).map(|v| v.map(Duration::from_nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_os::json::Place;
    use proptest::prelude::*;

    fn machine() -> CpuSet {
        "0-3".parse().unwrap()
    }

    const GOOD: &str = r#"# seed 002 Table 3, small
name = "t3"
description = "13 Linux + 3 RT0"
rt_cpus = "1-3"
duration_limit = "60s"

[[group]]
name = "linux"
count = 13
cpus = "0-3"
loops = 100000

[[group]]
name = "rt0"
class = "rt0"
count = 3
cpus = "1-3"
loops = 200000
sleep_every = 9000
sleep = "1ms"
"#;

    fn refused(text: &str) -> (usize, usize, String) {
        match parse(text, Path::new("s.toml"), &machine()) {
            Err(SpecError::Invalid(Located {
                place: Place { line, column },
                what,
                ..
            })) => (line, column, what),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_good_file_parses_with_its_defaults() {
        let sut = parse(GOOD, Path::new("s.toml"), &machine()).unwrap();
        assert_eq!(sut.tasks(), 16);
        assert_eq!(sut.sample_period, DEFAULT_SAMPLE_PERIOD);
        assert_eq!(sut.duration_limit, Some(Duration::from_secs(60)));
        assert_eq!(sut.groups[1].class, GroupClass::Rt0);
        assert_eq!(
            sut.groups[1].sleep,
            Some(Every {
                loops: 9000,
                duration: Duration::from_millis(1)
            })
        );
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line_and_column() {
        let (line, column, message) = refused(&GOOD.replace("loops = 100000", "loop = 100000"));
        assert_eq!((line, column), (11, 1), "{message}");
        assert!(message.contains("unknown field `loop`"), "{message}");
        let (line, column, _) = refused(&GOOD.replace("description", "  descr"));
        assert_eq!((line, column), (3, 3));
    }

    #[test]
    fn a_wrong_type_is_named_with_its_line_and_column() {
        let (line, column, message) = refused(&GOOD.replace("count = 13", "count = \"13\""));
        assert_eq!((line, column), (9, 9), "{message}");
        assert!(message.contains("invalid type"), "{message}");
        let (line, column, message) = refused(&GOOD.replace("sleep = \"1ms\"", "sleep = 1"));
        assert_eq!((line, column), (20, 9), "{message}");
        assert!(message.contains("like \"1ms\""), "{message}");
    }

    #[test]
    fn a_mask_with_no_online_cpu_is_named_with_its_line_and_column() {
        let (line, column, message) = refused(&GOOD.replace("cpus = \"0-3\"", "cpus = \"8-9\""));
        assert_eq!((line, column), (10, 8), "{message}");
        assert!(
            message.contains("online CPU") && message.contains("8-9"),
            "{message}"
        );
        let (line, column, message) = refused(&GOOD.replace("cpus = \"0-3\"", "cpu_mask = 0xf0"));
        assert_eq!((line, column), (10, 12), "{message}");
        assert!(message.contains("4-7"), "{message}");
    }

    #[test]
    fn a_negative_duration_is_named_with_its_line_and_column() {
        let (line, column, message) = refused(&GOOD.replace("\"60s\"", "\"-60s\""));
        assert_eq!((line, column), (5, 18), "{message}");
        assert!(message.contains("positive"), "{message}");
        let (line, column, message) = refused(&GOOD.replace("\"1ms\"", "\"0ms\""));
        assert_eq!((line, column), (20, 9), "{message}");
        assert!(message.contains("positive"), "{message}");
    }

    #[test]
    fn semantic_refusals_point_at_their_key() {
        let (line, column, m) = refused(&GOOD.replace("rt_cpus = \"1-3\"", "rt_cpus = \"0-3\""));
        assert_eq!((line, column), (4, 11), "{m}");
        assert!(m.contains("NRT"), "{m}");
        let (line, _, m) = refused(&GOOD.replace("class = \"rt0\"", "class = \"rt1\""));
        assert_eq!(line, 15, "{m}");
        assert!(m.contains("priority"), "{m}");
        let (line, column, m) =
            refused(&GOOD.replace("class = \"rt0\"", "class = \"rt1\"\npriority = 99"));
        assert_eq!((line, column), (16, 12), "{m}");
        let (line, _, m) = refused(&GOOD.replace("\ncpus = \"1-3\"", "\ncpus = \"0-2\""));
        assert_eq!(line, 17, "{m}");
        assert!(m.contains("CPU 0"), "{m}");
        let (line, _, m) = refused(&GOOD.replace("sleep = \"1ms\"\n", ""));
        assert_eq!(line, 19, "{m}");
        let (line, _, m) = refused(&GOOD.replace("name = \"rt0\"", "name = \"linux\""));
        assert_eq!(line, 14, "{m}");
    }

    #[test]
    fn the_shipped_scenarios_parse_on_the_machines_they_are_sized_for() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let two = path.to_string_lossy().ends_with("-2cpu.toml");
            let machine: CpuSet = if two { "0-1" } else { "0-3" }.parse().unwrap();
            let sut = parse(&text, &path, &machine).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(sut.groups.len(), 2, "{}", path.display());
            assert!(sut.duration_limit.is_some(), "{}", path.display());
            seen += 1;
        }
        assert_eq!(seen, 6, "tables 3, 4 and 5, each for 4 and for 2 CPUs");
    }

    #[test]
    fn durations_read_and_write_with_units() {
        assert_eq!(parse_duration("1ms").unwrap(), Duration::from_millis(1));
        assert_eq!(
            parse_duration("1.5 s").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert!(parse_duration("-1ms").unwrap_err().contains("positive"));
        assert!(parse_duration("12").is_err());
        assert_eq!(format_duration(Duration::from_micros(1500)), "1500us");
        assert_eq!(format_duration(Duration::from_secs(2)), "2s");
        assert_eq!(format_duration(Duration::from_nanos(7)), "7ns");
    }

    fn arb_cpus() -> impl Strategy<Value = CpuSet> {
        prop::collection::btree_set(0usize..4, 1..=4).prop_map(CpuSet::from_cpus)
    }

    fn arb_duration() -> impl Strategy<Value = Duration> {
        (1u64..5_000_000_000).prop_map(Duration::from_nanos)
    }

    fn arb_every() -> impl Strategy<Value = Option<Every>> {
        prop::option::of(
            (1u64..1_000_000, arb_duration())
                .prop_map(|(loops, duration)| Every { loops, duration }),
        )
    }

    fn arb_group(i: usize) -> impl Strategy<Value = TaskGroup> {
        (
            1u32..20,
            arb_cpus(),
            prop_oneof![
                Just(GroupClass::Normal),
                (any::<bool>(), 1u8..=98).prop_map(|(fifo, priority)| GroupClass::Rt1 {
                    policy: if fifo { RtPolicy::Fifo } else { RtPolicy::Rr },
                    priority
                }),
            ],
            1u64..u64::MAX / 2,
            arb_every(),
            arb_every(),
        )
            .prop_map(
                move |(count, cpus, class, loops, sleep, section)| TaskGroup {
                    name: format!("group \"{i}\""),
                    count,
                    cpus,
                    class,
                    loops,
                    sleep,
                    section,
                },
            )
    }

    proptest! {
        #[test]
        fn a_valid_scenario_round_trips_through_its_file(
            rt in 1usize..4,
            limit in prop::option::of(arb_duration()),
            period_us in 100u64..10_000,
            extra_us in 0u64..100_000,
            groups in (1usize..5).prop_flat_map(|n| (0..n).map(arb_group).collect::<Vec<_>>()),
            rt0 in any::<bool>(),
        ) {
            let mut groups = groups;
            if rt0 {
                groups.push(TaskGroup {
                    name: "rt0".into(),
                    count: 1,
                    cpus: CpuSet::from_cpus([rt]),
                    class: GroupClass::Rt0,
                    loops: 1000,
                    sleep: None,
                    section: None,
                });
            }
            let sut = Scenario {
                name: "round \"trip\"\nsecond line".into(),
                description: String::new(),
                rt_cpus: CpuSet::from_cpus(rt..4),
                duration_limit: limit,
                sample_period: Duration::from_micros(period_us),
                timeline_bucket: Duration::from_micros(period_us + extra_us),
                groups,
            };
            let text = sut.to_toml();
            let back = parse(&text, Path::new("gen.toml"), &machine());
            prop_assert_eq!(back.as_ref().ok(), Some(&sut), "{}\n{:?}", text, back);
        }

        #[test]
        fn arbitrary_text_never_panics_and_every_refusal_has_a_place(text in "(?s).{0,300}") {
            match parse(&text, Path::new("f.toml"), &machine()) {
                Err(SpecError::Invalid(Located { place: Place { line, column }, .. })) => {
                    prop_assert!(line >= 1 && column >= 1);
                    let lines = text.split('\n').count();
                    prop_assert!(line <= lines, "line {} of {}", line, lines);
                }
                Err(other) => prop_assert!(false, "{}", other),
                Ok(_) => {}
            }
        }

        #[test]
        fn arbitrary_lines_in_a_good_file_never_panic(
            line in "[a-z_]{1,12} = (-?[0-9]{1,25}|\"[^\"\n]{0,20}\"|[0-9.e+-]{1,12})",
            at in 0usize..21,
        ) {
            let mut lines: Vec<&str> = GOOD.lines().collect();
            lines.insert(at.min(lines.len()), &line);
            let _ = parse(&lines.join("\n"), Path::new("f.toml"), &machine());
        }
    }

    #[test]
    fn task_counts_are_bounded_before_anything_starts() {
        let (line, column, m) = refused(&GOOD.replace("count = 13", "count = 4294967295"));
        assert_eq!((line, column), (9, 9), "{m}");
        assert!(m.contains("4096"), "{m}");
        let (line, _, m) = refused(&GOOD.replace("count = 13", "count = 4095"));
        assert_eq!(line, 16, "the second group goes over: {m}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("s.toml");
        ictus_os::testing::mkfifo(&fifo).unwrap();
        assert!(matches!(
            load(&fifo),
            Err(SpecError::Read(ictus_os::fs::InputError::NotRegular { .. }))
        ));
    }
}
