//! The schedule's reader: its TOML as serde reads it (the raw tables), and each
//! table or group of keys checked where it stands, with the rule it breaks there.

use super::*;

/// A schedule's text as [`Schedule::parse`] checks it, one table or group of keys
/// at a time: where a value stands, and the error for a rule it breaks there.
pub(super) struct Reader<'a> {
    pub(super) text: &'a str,
    pub(super) path: &'a Path,
    pub(super) lines: LineIndex<'a>,
}

/// The tick, the major frame and the wait mode, checked together.
pub(super) struct Timing {
    pub(super) tick: Nanos,
    pub(super) major: u64,
    pub(super) wait: WaitSpec,
    /// Where the margin stands, when one is given.
    pub(super) margin: Option<Range<usize>>,
}

/// What the subsystems checked so far leave for the next ones.
#[derive(Default)]
pub(super) struct Seen {
    /// Each name, where it stands.
    pub(super) names: BTreeMap<String, Location>,
    /// The CPUs an RT0 subsystem holds, and which.
    pub(super) rt0_cpus: BTreeMap<usize, String>,
    /// Each group's start, period, host and first member.
    pub(super) groups: BTreeMap<String, (u64, u64, usize, String)>,
}

impl Reader<'_> {
    pub(super) fn loc(&self, span: Range<usize>) -> Location {
        let at = self.lines.locate(span.start);
        Location {
            line: at.line,
            column: at.column,
        }
    }

    pub(super) fn fail(&self, span: Range<usize>, rule: Rule) -> ScheduleError {
        ScheduleError::Invalid {
            path: self.path.to_path_buf(),
            location: self.loc(span),
            rule,
        }
    }

    /// `pm_qos`: a bound in microseconds (a number, or a string such as `"20us"`) or
    /// `"off"`.
    pub(super) fn pm_qos(&self, raw: &RawSchedule) -> Result<Option<PmQos>, ScheduleError> {
        let Some(v) = &raw.pm_qos else {
            return Ok(None);
        };
        let parsed = match v.get_ref() {
            toml::Value::Integer(us) => u32::try_from(*us)
                .map(PmQos::Bound)
                .map_err(|_| us.to_string()),
            toml::Value::String(s) => s.parse::<PmQos>().map_err(|_| s.clone()),
            other => Err(other.to_string()),
        };
        parsed
            .map(Some)
            .map_err(|found| self.fail(v.span(), Rule::PmQos(found)))
    }

    /// `[security]`: the keys directory (relative to the schedule's own) or
    /// `insecure = true`, for a run across hosts only.
    pub(super) fn security(
        &self,
        raw: &RawSchedule,
        path: &Path,
    ) -> Result<SecuritySpec, ScheduleError> {
        let Some(sec) = &raw.security else {
            return Ok(SecuritySpec::default());
        };
        if raw.hosts.is_empty() {
            return Err(self.fail(sec.span(), Rule::SecurityWithoutHosts));
        }
        let s = sec.get_ref();
        let insecure = s.insecure.as_ref().is_some_and(|v| *v.get_ref());
        if let (Some(keys), true) = (&s.keys, insecure) {
            return Err(self.fail(keys.span(), Rule::KeysAndInsecure));
        }
        let keys = s.keys.as_ref().map(|k| {
            let dir = Path::new(k.get_ref().trim());
            match path.parent() {
                Some(parent) if dir.is_relative() => parent.join(dir),
                _ => dir.to_path_buf(),
            }
        });
        Ok(SecuritySpec { keys, insecure })
    }

    /// `explain_threshold`: a duration longer than zero.
    pub(super) fn explain_threshold(
        &self,
        raw: &RawSchedule,
    ) -> Result<Option<Nanos>, ScheduleError> {
        let Some(v) = &raw.explain_threshold else {
            return Ok(None);
        };
        match duration(v) {
            Ok(t) if t == Nanos::ZERO => Err(self.fail(v.span(), Rule::ZeroExplainThreshold)),
            Ok(t) => Ok(Some(t)),
            Err(rule) => Err(self.fail(v.span(), rule)),
        }
    }

    /// `silence`: a duration of at least two ticks.
    pub(super) fn silence(
        &self,
        raw: &RawSchedule,
        tick: Nanos,
    ) -> Result<Option<Nanos>, ScheduleError> {
        let Some(v) = &raw.silence else {
            return Ok(None);
        };
        match duration(v) {
            Ok(t) if t < tick * 2 => {
                Err(self.fail(v.span(), Rule::SilenceTooShort { silence: t, tick }))
            }
            Ok(t) => Ok(Some(t)),
            Err(rule) => Err(self.fail(v.span(), rule)),
        }
    }

    /// `safe_state`: off, pause, run or a declared mode (default off).
    pub(super) fn safe_state(
        &self,
        raw: &RawSchedule,
        modes: &[String],
    ) -> Result<String, ScheduleError> {
        let Some(v) = &raw.safe_state else {
            return Ok("off".to_string());
        };
        let name = v.get_ref().to_ascii_lowercase();
        let known = ["off", "pause", "run"].contains(&name.as_str())
            || modes.iter().any(|m| m.to_ascii_lowercase() == name);
        if !known {
            return Err(self.fail(v.span(), Rule::UnknownState(v.get_ref().clone())));
        }
        Ok(name)
    }

    /// The tick, the major frame and the wait mode, checked together, with where
    /// the margin stands when one is given.
    pub(super) fn timing(&self, raw: &RawSchedule) -> Result<Timing, ScheduleError> {
        let tick = duration(&raw.tick).map_err(|r| self.fail(raw.tick.span(), r))?;
        let major = *raw.major_frame.get_ref();
        let margin = match &raw.margin {
            Some(m) => Some((duration(m).map_err(|r| self.fail(m.span(), r))?, m.span())),
            None => None,
        };
        let wait = match raw.wait.as_ref().map(|w| (w.get_ref().as_str(), w.span())) {
            None | Some(("hybrid", _)) => WaitSpec::Hybrid {
                margin: margin.as_ref().map(|m| m.0),
            },
            Some((other, span)) => {
                if let Some((_, mspan)) = &margin {
                    return Err(self.fail(mspan.clone(), Rule::MarginWithoutHybrid));
                }
                match other {
                    "spin" => WaitSpec::Spin,
                    "nanosleep" => WaitSpec::Nanosleep,
                    _ => return Err(self.fail(span, Rule::UnknownWait(other.to_string()))),
                }
            }
        };
        check_tick(tick, major, &wait).map_err(|(part, rule)| {
            let span = match (part, &margin) {
                (TickPart::Tick, _) | (TickPart::Margin, None) => raw.tick.span(),
                (TickPart::MajorFrame, _) => raw.major_frame.span(),
                (TickPart::Margin, Some((_, span))) => span.clone(),
            };
            self.fail(span, rule)
        })?;
        Ok(Timing {
            tick,
            major,
            wait,
            margin: margin.map(|(_, span)| span),
        })
    }

    /// Where the cells are declared: a file (its place noted), inline `[[cell]]`
    /// tables (checked here), or nowhere; not both.
    pub(super) fn cells(
        &self,
        raw: &RawSchedule,
        places: &mut Places,
    ) -> Result<CellSource, ScheduleError> {
        Ok(match (&raw.cells, &raw.cell) {
            (Some(f), Some(_)) => return Err(self.fail(f.span(), Rule::CellsTwice)),
            (Some(f), None) => {
                places.cells = self.loc(f.span());
                let rel = PathBuf::from(f.get_ref());
                CellSource::File(if rel.is_absolute() {
                    rel
                } else {
                    self.path.parent().unwrap_or(Path::new("")).join(rel)
                })
            }
            (None, Some(specs)) => {
                let file = self.path.display().to_string();
                let table = CellTable::from_specs(specs, self.text, &file)
                    .map_err(|e| cell_file_error(e, self.path, places.cells))?;
                CellSource::Inline(table)
            }
            (None, None) => CellSource::None,
        })
    }

    /// The user modes (counted first, then each a plain name unlike every state
    /// before it) and the initial state, one of them or off, pause or run.
    pub(super) fn states(&self, raw: &RawSchedule) -> Result<(Vec<String>, String), ScheduleError> {
        let raw_modes = raw.modes.as_deref().unwrap_or_default();
        if let Some(over) = raw_modes.get(crate::state::MAX_MODES) {
            return Err(self.fail(over.span(), Rule::TooManyModes(raw_modes.len())));
        }
        let mut modes = Vec::with_capacity(raw_modes.len());
        let mut seen_states: BTreeSet<String> = ["off", "pause", "run"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for m in raw_modes {
            let name = m.get_ref();
            if !valid_name(name) {
                return Err(self.fail(m.span(), Rule::BadName(name.clone())));
            }
            if !seen_states.insert(name.to_ascii_lowercase()) {
                return Err(self.fail(m.span(), Rule::DuplicateState(name.clone())));
            }
            modes.push(name.clone());
        }
        let initial_state = match &raw.initial_state {
            None => "off".to_string(),
            Some(s) => {
                if !seen_states.contains(&s.get_ref().to_ascii_lowercase()) {
                    return Err(self.fail(s.span(), Rule::UnknownState(s.get_ref().clone())));
                }
                s.get_ref().to_ascii_lowercase()
            }
        };
        Ok((modes, initial_state))
    }

    /// The run's name: as given (a plain name), else the file's stem with every
    /// other character made a `-` (`run` when nothing is left).
    pub(super) fn name(&self, raw: &RawSchedule) -> Result<String, ScheduleError> {
        Ok(match &raw.name {
            Some(n) => {
                if !valid_name(n.get_ref()) {
                    return Err(self.fail(n.span(), Rule::BadName(n.get_ref().clone())));
                }
                n.get_ref().clone()
            }
            None => {
                let stem = self
                    .path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let cleaned: String = stem
                    .chars()
                    .map(|c| if valid_char(c) { c } else { '-' })
                    .collect();
                if cleaned.is_empty() {
                    "run".to_string()
                } else {
                    cleaned
                }
            }
        })
    }

    /// The `[[subsystem]]` tables, in file order (at least one), each builtin's
    /// places noted.
    pub(super) fn subsystems(
        &self,
        raw: &RawSchedule,
        major: u64,
        hosts: &[HostSpec],
        online: &CpuSet,
        places: &mut Places,
    ) -> Result<Vec<SubsystemSpec>, ScheduleError> {
        let mut subsystems = Vec::with_capacity(raw.subsystems.len());
        let mut seen = Seen::default();
        for s in &raw.subsystems {
            let spec = self.subsystem(s, major, hosts, online, &mut seen)?;
            let s = s.get_ref();
            if let Some(w) = &s.writes {
                places.writes.push((
                    subsystems.len(),
                    w.get_ref().iter().map(|e| self.loc(e.span())).collect(),
                ));
            }
            if let Some(b) = &s.builtin {
                places.builtins.push(BuiltinPlaces {
                    subsystem: subsystems.len(),
                    name: self.loc(b.span()),
                    config: s
                        .config
                        .as_ref()
                        .map_or_else(|| self.loc(s.name.span()), |c| self.loc(c.span())),
                    keys: s
                        .config
                        .as_ref()
                        .map(|c| {
                            c.get_ref()
                                .iter()
                                .map(|(k, v)| (k.clone(), self.loc(v.span())))
                                .collect()
                        })
                        .unwrap_or_default(),
                });
            }
            subsystems.push(spec);
        }
        if subsystems.is_empty() {
            return Err(self.fail(0..0, Rule::NoSubsystem));
        }
        Ok(subsystems)
    }

    /// One `[[subsystem]]` table: its name, cadence, host, CPU, class, process and
    /// group, checked in that order against the tables before it (`seen`).
    pub(super) fn subsystem(
        &self,
        table: &Spanned<RawSubsystem>,
        major: u64,
        hosts: &[HostSpec],
        online: &CpuSet,
        seen: &mut Seen,
    ) -> Result<SubsystemSpec, ScheduleError> {
        let span_all = table.span();
        let s = table.get_ref();
        let sname = s.name.get_ref();
        if !valid_name(sname) {
            return Err(self.fail(s.name.span(), Rule::BadName(sname.clone())));
        }
        if let Some(first) = seen.names.get(sname) {
            return Err(self.fail(
                s.name.span(),
                Rule::DuplicateName {
                    name: sname.clone(),
                    first: *first,
                },
            ));
        }
        seen.names.insert(sname.clone(), self.loc(s.name.span()));
        let (start, period) = self.cadence(s, &span_all, major)?;
        let host = self.host(s, hosts)?;
        let cpu = match &s.cpu {
            Some(c) => {
                let cpu = *c.get_ref();
                // Another host's CPUs are checked by its local coordinator.
                if host == 0 && !online.contains(cpu) {
                    return Err(self.fail(
                        c.span(),
                        Rule::CpuOffline {
                            cpu,
                            online: online.clone(),
                        },
                    ));
                }
                Some(cpu)
            }
            None => None,
        };
        let class = self.class(s, cpu, &span_all, &mut seen.rt0_cpus)?;
        let process = self.process(s)?;
        if let (Some(b), Process::Program { .. }) = (&s.builtin, &process) {
            return Err(self.fail(b.span(), Rule::BuiltinInProgram));
        }
        if let Some(g) = &s.group {
            self.group(g, &process, (start, period, host), sname, &mut seen.groups)?;
        }
        let config: toml::Table = s
            .config
            .as_ref()
            .map(|c| {
                c.get_ref()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.get_ref().clone()))
                    .collect()
            })
            .unwrap_or_default();
        let writes = match &s.writes {
            Some(w) => Some(w.get_ref().iter().map(|e| e.get_ref().clone()).collect()),
            None => s
                .builtin
                .as_ref()
                .and_then(|b| crate::builtins::writes(b.get_ref(), &config)),
        };
        Ok(SubsystemSpec {
            name: sname.clone(),
            start,
            period,
            cpu,
            class,
            process,
            builtin: s.builtin.as_ref().map(|b| b.get_ref().clone()),
            group: s.group.as_ref().map(|g| g.get_ref().clone()),
            config,
            on_error: self.on_error(s)?,
            on_overrun: self.on_overrun(s)?,
            watchdog: self.watchdog(s.watchdog.as_ref())?,
            host,
            writes,
            location: self.loc(s.name.span()),
        })
    }

    /// A subsystem's `on_error`: `stop` (the default), `continue` or `stop-run`.
    pub(super) fn on_error(
        &self,
        s: &RawSubsystem,
    ) -> Result<crate::subsystem::OnError, ScheduleError> {
        use crate::subsystem::OnError;
        let Some(v) = &s.on_error else {
            return Ok(OnError::default());
        };
        [OnError::Stop, OnError::Continue, OnError::StopRun]
            .into_iter()
            .find(|o| o.name() == v.get_ref())
            .ok_or_else(|| self.fail(v.span(), Rule::UnknownOnError(v.get_ref().clone())))
    }

    /// A subsystem's `on_overrun` (`count` by default), `overrun_mode` (with `mode`
    /// only; the state is checked against the modes by [`Reader::overrun_modes`])
    /// and `overrun_after` (at least 1, default 1).
    pub(super) fn on_overrun(&self, s: &RawSubsystem) -> Result<OnOverrun, ScheduleError> {
        let after = match &s.overrun_after {
            Some(a) if *a.get_ref() == 0 => return Err(self.fail(a.span(), Rule::ZeroOverrunAfter)),
            Some(a) => *a.get_ref(),
            None => 1,
        };
        let action = match (&s.on_overrun, &s.overrun_mode) {
            (None, Some(m)) => return Err(self.fail(m.span(), Rule::OverrunModeWithoutMode)),
            (None, None) => OverrunAction::Count,
            (Some(v), mode) => match (v.get_ref().as_str(), mode) {
                ("mode", Some(m)) => OverrunAction::Mode(m.get_ref().to_ascii_lowercase()),
                ("mode", None) => return Err(self.fail(v.span(), Rule::OverrunModeMissing)),
                ("count" | "warn" | "stop-run", Some(m)) => {
                    return Err(self.fail(m.span(), Rule::OverrunModeWithoutMode));
                }
                ("count", None) => OverrunAction::Count,
                ("warn", None) => OverrunAction::Warn,
                ("stop-run", None) => OverrunAction::StopRun,
                (other, _) => {
                    return Err(self.fail(v.span(), Rule::UnknownOnOverrun(other.to_string())));
                }
            },
        };
        Ok(OnOverrun { action, after })
    }

    /// Every `overrun_mode` names a state of the schedule (off, pause, run or a
    /// declared mode).
    pub(super) fn overrun_modes(
        &self,
        raw: &RawSchedule,
        modes: &[String],
    ) -> Result<(), ScheduleError> {
        for t in &raw.subsystems {
            if let Some(m) = &t.get_ref().overrun_mode {
                let name = m.get_ref().to_ascii_lowercase();
                let known = ["off", "pause", "run"].contains(&name.as_str())
                    || modes.iter().any(|x| x.to_ascii_lowercase() == name);
                if !known {
                    return Err(self.fail(m.span(), Rule::UnknownState(m.get_ref().clone())));
                }
            }
        }
        Ok(())
    }

    /// A `watchdog` (a subsystem's, or the run's for every subsystem without its
    /// own): a duration longer than zero, or none.
    pub(super) fn watchdog(
        &self,
        w: Option<&Spanned<String>>,
    ) -> Result<Option<Nanos>, ScheduleError> {
        let Some(w) = w else {
            return Ok(None);
        };
        let d = duration(w).map_err(|rule| self.fail(w.span(), rule))?;
        if d == Nanos::ZERO {
            return Err(self.fail(w.span(), Rule::ZeroWatchdog));
        }
        Ok(Some(d))
    }

    /// A subsystem's start and period: the period divides the major frame, the
    /// start falls inside the period (each reported at the table without them).
    pub(super) fn cadence(
        &self,
        s: &RawSubsystem,
        span_all: &Range<usize>,
        major: u64,
    ) -> Result<(u64, u64), ScheduleError> {
        let period = s.period.as_ref().map_or(1, |p| *p.get_ref());
        let period_span = s.period.as_ref().map_or(span_all.clone(), |p| p.span());
        if period == 0 {
            return Err(self.fail(period_span, Rule::ZeroPeriod));
        }
        if period > major {
            return Err(self.fail(period_span, Rule::PeriodTooLong { period, major }));
        }
        if !major.is_multiple_of(period) {
            return Err(self.fail(period_span, Rule::PeriodDoesNotDivide { period, major }));
        }
        let start = s.start.as_ref().map_or(0, |p| *p.get_ref());
        if start >= period {
            return Err(self.fail(
                s.start.as_ref().map_or(span_all.clone(), |p| p.span()),
                Rule::StartOutsidePeriod { start, period },
            ));
        }
        Ok((start, period))
    }

    /// A subsystem's host: the first (0) without `host`, else one of the `[[host]]`
    /// tables.
    pub(super) fn host(
        &self,
        s: &RawSubsystem,
        hosts: &[HostSpec],
    ) -> Result<usize, ScheduleError> {
        match &s.host {
            None => Ok(0),
            Some(h) if hosts.is_empty() => Err(self.fail(h.span(), Rule::HostWithoutHosts)),
            Some(h) => hosts
                .iter()
                .position(|x| x.name == *h.get_ref())
                .ok_or_else(|| {
                    self.fail(
                        h.span(),
                        Rule::UnknownHost {
                            name: h.get_ref().clone(),
                            known: hosts.iter().map(|x| x.name.clone()).collect(),
                        },
                    )
                }),
        }
    }

    /// A subsystem's class: `policy` and `priority` for RT1 only, one RT0 per CPU
    /// (noted in `rt0_cpus`), an RT1 priority of 1 to 98.
    pub(super) fn class(
        &self,
        s: &RawSubsystem,
        cpu: Option<usize>,
        span_all: &Range<usize>,
        rt0_cpus: &mut BTreeMap<usize, String>,
    ) -> Result<Class, ScheduleError> {
        let class_name = s.class.as_ref().map_or("normal", |c| c.get_ref().as_str());
        let class_span = s.class.as_ref().map_or(span_all.clone(), |c| c.span());
        if let Some(p) = &s.policy
            && class_name != "rt1"
        {
            return Err(self.fail(p.span(), Rule::PolicyWithoutRt1));
        }
        if let Some(p) = &s.priority
            && class_name != "rt1"
        {
            return Err(self.fail(p.span(), Rule::PriorityWithoutRt1));
        }
        Ok(match class_name {
            "rt0" => {
                let Some(cpu) = cpu else {
                    return Err(self.fail(class_span, Rule::Rt0WithoutCpu));
                };
                if let Some(other) = rt0_cpus.get(&cpu) {
                    return Err(self.fail(
                        s.cpu.as_ref().map_or(class_span, |c| c.span()),
                        Rule::TwoRt0 {
                            cpu,
                            first: other.clone(),
                        },
                    ));
                }
                rt0_cpus.insert(cpu, s.name.get_ref().clone());
                Class::Rt0 { cpu }
            }
            "rt1" => {
                let priority = s.priority.as_ref().map_or(50, |p| *p.get_ref());
                if !(1..=98).contains(&priority) {
                    return Err(self.fail(
                        s.priority.as_ref().map_or(class_span, |p| p.span()),
                        Rule::PriorityOutOfRange(priority),
                    ));
                }
                let policy = match s.policy.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
                    None | Some(("fifo", _)) => RtPolicy::Fifo,
                    Some(("rr", _)) => RtPolicy::Rr,
                    Some((other, span)) => {
                        return Err(self.fail(span, Rule::UnknownPolicy(other.to_string())));
                    }
                };
                Class::Rt1 { policy, priority }
            }
            "normal" => Class::Normal,
            other => return Err(self.fail(class_span, Rule::UnknownClass(other.to_string()))),
        })
    }

    /// A subsystem's process: in-process (no `args`), `own` (a builtin, no `args`),
    /// or a program (not empty) with its arguments.
    pub(super) fn process(&self, s: &RawSubsystem) -> Result<Process, ScheduleError> {
        Ok(
            match s.process.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
                None | Some(("in-process", _)) => {
                    if let Some(a) = &s.args {
                        return Err(self.fail(a.span(), Rule::ArgsWithoutProgram));
                    }
                    Process::InProcess
                }
                Some(("", span)) => return Err(self.fail(span, Rule::EmptyProgram)),
                Some(("own", span)) => {
                    if let Some(a) = &s.args {
                        return Err(self.fail(a.span(), Rule::ArgsWithoutProgram));
                    }
                    if s.builtin.is_none() {
                        return Err(self.fail(span, Rule::OwnWithoutBuiltin));
                    }
                    Process::Own
                }
                Some((program, _)) => Process::Program {
                    program: program.to_string(),
                    args: s
                        .args
                        .as_ref()
                        .map(|a| a.get_ref().clone())
                        .unwrap_or_default(),
                },
            },
        )
    }

    /// A subsystem's synchronous group: its members are threads of one process, on
    /// one host, with the cadence (`start`, `period`) of the first (noted in
    /// `groups`).
    pub(super) fn group(
        &self,
        g: &Spanned<String>,
        process: &Process,
        (start, period, host): (u64, u64, usize),
        sname: &str,
        groups: &mut BTreeMap<String, (u64, u64, usize, String)>,
    ) -> Result<(), ScheduleError> {
        if !matches!(process, Process::InProcess) {
            return Err(self.fail(g.span(), Rule::GroupAcrossProcesses));
        }
        match groups.get(g.get_ref()) {
            Some((gstart, gperiod, _, first)) if (*gstart, *gperiod) != (start, period) => {
                Err(self.fail(
                    g.span(),
                    Rule::GroupCadence {
                        group: g.get_ref().clone(),
                        first: first.clone(),
                    },
                ))
            }
            Some((_, _, ghost, first)) if *ghost != host => Err(self.fail(
                g.span(),
                Rule::GroupAcrossHosts {
                    group: g.get_ref().clone(),
                    first: first.clone(),
                },
            )),
            Some(_) => Ok(()),
            None => {
                groups.insert(
                    g.get_ref().clone(),
                    (start, period, host, sname.to_string()),
                );
                Ok(())
            }
        }
    }

    /// `[record]`: the cells (each one's place noted, checked against the table
    /// with the builtins) and `every`, at least 1.
    pub(super) fn record(
        &self,
        raw: &RawSchedule,
        places: &mut Places,
    ) -> Result<RecordSpec, ScheduleError> {
        let Some(rec) = &raw.record else {
            return Ok(RecordSpec::default());
        };
        let every = match &rec.every {
            None => 1,
            Some(v) if *v.get_ref() == 0 => return Err(self.fail(v.span(), Rule::ZeroRecordEvery)),
            Some(v) => *v.get_ref(),
        };
        let cells = rec.cells.as_ref().map(|cells| {
            places.recorded = cells.iter().map(|c| self.loc(c.span())).collect();
            cells.iter().map(|c| c.get_ref().clone()).collect()
        });
        Ok(RecordSpec { cells, every })
    }

    /// The stress check: at least one counter, each counter's place noted.
    pub(super) fn stress(
        &self,
        raw: &RawSchedule,
        places: &mut Places,
    ) -> Result<Option<StressCheck>, ScheduleError> {
        let Some(st) = &raw.stress else {
            return Ok(None);
        };
        if st.counters.get_ref().is_empty() {
            return Err(self.fail(st.counters.span(), Rule::NoCounters));
        }
        places.counters = st
            .counters
            .get_ref()
            .iter()
            .map(|c| self.loc(c.span()))
            .collect();
        Ok(Some(StressCheck {
            counters: st
                .counters
                .get_ref()
                .iter()
                .map(|c| c.get_ref().clone())
                .collect(),
        }))
    }
}

pub(super) fn valid_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

pub(super) fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.chars().all(valid_char)
}

/// The `[[hub]]` declarations (each already checked by [`HubDecl`]'s own parsing),
/// with unique names; a duplicate is reported at its `name`, a `host` that names
/// no `[[host]]` at the `host`.
pub(super) fn hubs(
    raw: &RawSchedule,
    text: &str,
    hosts: &[HostSpec],
) -> Result<Vec<HubDecl>, (Range<usize>, Rule)> {
    let Some(decls) = &raw.hub else {
        return Ok(Vec::new());
    };
    // The names again, with their spans (the declarations keep none).
    #[derive(Deserialize)]
    struct Named {
        name: Spanned<String>,
        #[serde(default)]
        host: Option<Spanned<String>>,
    }
    #[derive(Deserialize)]
    struct Names {
        #[serde(default)]
        hub: Vec<Named>,
    }
    if let Some(over) = decls.get(crate::hub::MAX_HUBS) {
        return Err((over.span(), Rule::TooManyHubs(decls.len())));
    }
    let names = toml::from_str::<Names>(text)
        .map(|n| n.hub)
        .unwrap_or_default();
    let mut seen: BTreeMap<String, Range<usize>> = BTreeMap::new();
    let mut out = Vec::with_capacity(decls.len());
    for (k, table) in decls.iter().enumerate() {
        let name_span = names.get(k).map(|n| n.name.span());
        let decl = HubDecl::deserialize(toml::Value::Table(table.get_ref().clone())).map_err(
            |e: toml::de::Error| {
                (
                    name_span.clone().unwrap_or_else(|| table.span()),
                    Rule::Hub(e.message().trim().to_string()),
                )
            },
        )?;
        let span = name_span.unwrap_or_else(|| table.span());
        if let Some(host) = decl.host() {
            let at = names
                .get(k)
                .and_then(|n| n.host.as_ref())
                .map_or_else(|| span.clone(), Spanned::span);
            if hosts.is_empty() {
                return Err((at, Rule::HostWithoutHosts));
            }
            if !hosts.iter().any(|h| h.name == host) {
                return Err((
                    at,
                    Rule::UnknownHost {
                        name: host.to_string(),
                        known: hosts.iter().map(|x| x.name.clone()).collect(),
                    },
                ));
            }
        }
        if let Some(first) = seen.get(decl.name()) {
            return Err((
                span,
                Rule::DuplicateHub {
                    name: decl.name().to_string(),
                    first: Location::of(text, first.start),
                },
            ));
        }
        seen.insert(decl.name().to_string(), span);
        out.push(decl);
    }
    // The table as a whole (its total size): placed at the hub that crosses a limit.
    crate::hub::check_decls(&out).map_err(|(i, e)| {
        let span = names
            .get(i)
            .map_or_else(|| decls[i].span(), |n| n.name.span());
        (span, Rule::Hub(e.to_string()))
    })?;
    Ok(out)
}

pub(super) fn duration(s: &Spanned<String>) -> Result<Nanos, Rule> {
    let d = humantime::parse_duration(s.get_ref().trim())
        .map_err(|_| Rule::BadDuration(s.get_ref().clone()))?;
    u64::try_from(d.as_nanos())
        .map(Nanos::new)
        .map_err(|_| Rule::DurationTooLong(s.get_ref().clone()))
}

/// The `[[host]]` tables: names plain and unique, addresses `IP:PORT` and unique.
pub(super) fn hosts(
    raw: &[Spanned<RawHost>],
    loc: &dyn Fn(Range<usize>) -> Location,
) -> Result<Vec<HostSpec>, (Range<usize>, Rule)> {
    if let Some(over) = raw.get(MAX_HOSTS) {
        return Err((over.span(), Rule::TooManyHosts(raw.len())));
    }
    let mut out: Vec<HostSpec> = Vec::with_capacity(raw.len());
    for h in raw {
        let h = h.get_ref();
        let name = h.name.get_ref();
        if !valid_name(name) {
            return Err((h.name.span(), Rule::BadName(name.clone())));
        }
        if let Some(first) = out.iter().find(|o| o.name == *name) {
            return Err((
                h.name.span(),
                Rule::DuplicateHost {
                    name: name.clone(),
                    first: first.location,
                },
            ));
        }
        let text = h.address.get_ref();
        let address: std::net::SocketAddr = text
            .trim()
            .parse()
            .map_err(|_| (h.address.span(), Rule::BadAddress(text.clone())))?;
        if address.port() == 0 {
            return Err((h.address.span(), Rule::PortZero));
        }
        if let Some(first) = out.iter().find(|o| o.address == address) {
            return Err((
                h.address.span(),
                Rule::DuplicateAddress {
                    address,
                    first: first.name.clone(),
                },
            ));
        }
        out.push(HostSpec {
            name: name.clone(),
            address,
            location: loc(h.name.span()),
        });
    }
    Ok(out)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSchedule {
    pub(super) name: Option<Spanned<String>>,
    pub(super) tick: Spanned<String>,
    pub(super) major_frame: Spanned<u64>,
    pub(super) wait: Option<Spanned<String>>,
    pub(super) margin: Option<Spanned<String>>,
    pub(super) cells: Option<Spanned<String>>,
    pub(super) cell: Option<Vec<CellSpec>>,
    pub(super) modes: Option<Vec<Spanned<String>>>,
    pub(super) initial_state: Option<Spanned<String>>,
    pub(super) pm_qos: Option<Spanned<toml::Value>>,
    pub(super) explain_threshold: Option<Spanned<String>>,
    pub(super) silence: Option<Spanned<String>>,
    pub(super) safe_state: Option<Spanned<String>>,
    pub(super) watchdog: Option<Spanned<String>>,
    pub(super) stress: Option<RawStress>,
    pub(super) record: Option<RawRecord>,
    #[serde(rename = "subsystem", default)]
    pub(super) subsystems: Vec<Spanned<RawSubsystem>>,
    pub(super) hub: Option<Vec<Spanned<toml::Table>>>,
    #[serde(rename = "host", default)]
    pub(super) hosts: Vec<Spanned<RawHost>>,
    pub(super) security: Option<Spanned<RawSecurity>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSecurity {
    pub(super) keys: Option<Spanned<String>>,
    pub(super) insecure: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHost {
    pub(super) name: Spanned<String>,
    pub(super) address: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRecord {
    pub(super) cells: Option<Vec<Spanned<String>>>,
    pub(super) every: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStress {
    pub(super) counters: Spanned<Vec<Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSubsystem {
    pub(super) name: Spanned<String>,
    pub(super) start: Option<Spanned<u64>>,
    pub(super) period: Option<Spanned<u64>>,
    pub(super) cpu: Option<Spanned<usize>>,
    pub(super) class: Option<Spanned<String>>,
    pub(super) priority: Option<Spanned<u8>>,
    pub(super) policy: Option<Spanned<String>>,
    pub(super) process: Option<Spanned<String>>,
    pub(super) args: Option<Spanned<Vec<String>>>,
    pub(super) builtin: Option<Spanned<String>>,
    pub(super) group: Option<Spanned<String>>,
    pub(super) host: Option<Spanned<String>>,
    pub(super) on_error: Option<Spanned<String>>,
    pub(super) on_overrun: Option<Spanned<String>>,
    pub(super) overrun_mode: Option<Spanned<String>>,
    pub(super) overrun_after: Option<Spanned<u64>>,
    pub(super) watchdog: Option<Spanned<String>>,
    pub(super) writes: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) config: Option<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
}

impl Schedule {
    /// Parses and checks `text`, read from `path` (used for messages and to resolve
    /// relative paths), against the CPUs in `online`. Reads no file: the builtins'
    /// cells and the stress counters are checked here against inline `[[cell]]`
    /// tables (or against no cells), and against a cell file by
    /// [`Schedule::cell_table`] (which [`Schedule::from_file`] calls).
    pub fn parse(
        text: &str,
        path: impl AsRef<Path>,
        online: &CpuSet,
    ) -> Result<Schedule, ScheduleError> {
        let path = path.as_ref();
        let r = Reader {
            text,
            path,
            lines: LineIndex::new(text),
        };
        let raw: RawSchedule = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            r.fail(span, Rule::Syntax(e.message().trim().to_string()))
        })?;
        let Timing {
            tick,
            major,
            wait,
            margin,
        } = r.timing(&raw)?;
        let mut places = Places {
            tick: r.loc(raw.tick.span()),
            major_frame: r.loc(raw.major_frame.span()),
            margin: margin.map(|span| r.loc(span)),
            ..Places::default()
        };
        let cells = r.cells(&raw, &mut places)?;
        let (modes, initial_state) = r.states(&raw)?;
        r.overrun_modes(&raw, &modes)?;
        let name = r.name(&raw)?;
        // Counted before anything is checked per subsystem, so that checking stays
        // bounded whatever the file holds.
        if let Some(over) = raw.subsystems.get(crate::control::MAX_SUBSYSTEMS) {
            return Err(r.fail(over.span(), Rule::TooManySubsystems(raw.subsystems.len())));
        }
        let hosts =
            hosts(&raw.hosts, &|span| r.loc(span)).map_err(|(span, rule)| r.fail(span, rule))?;
        let mut subsystems = r.subsystems(&raw, major, &hosts, online, &mut places)?;
        if let Some(w) = r.watchdog(raw.watchdog.as_ref())? {
            for s in subsystems.iter_mut().filter(|s| s.watchdog.is_none()) {
                s.watchdog = Some(w);
            }
        }
        let stress = r.stress(&raw, &mut places)?;
        let hubs = hubs(&raw, text, &hosts).map_err(|(span, rule)| r.fail(span, rule))?;
        let pm_qos = r.pm_qos(&raw)?;
        let explain_threshold = r.explain_threshold(&raw)?;
        let security = r.security(&raw, path)?;
        let record = r.record(&raw, &mut places)?;
        let silence = r.silence(&raw, tick)?;
        let safe_state = r.safe_state(&raw, &modes)?;
        let schedule = Schedule {
            name,
            path: path.to_path_buf(),
            tick,
            major_frame: major,
            wait,
            cells,
            modes,
            initial_state,
            stress,
            subsystems,
            hubs,
            hosts,
            pm_qos,
            explain_threshold,
            security,
            text: text.to_string(),
            record,
            silence,
            safe_state,
            places,
        };
        let empty = CellTable::default();
        match &schedule.cells {
            CellSource::None => schedule.check_against(Some(&empty))?,
            CellSource::Inline(table) => schedule.check_against(Some(table))?,
            // Checked against the file's table by cell_table.
            CellSource::File(_) => schedule.check_against(None)?,
        }
        Ok(schedule)
    }
}
