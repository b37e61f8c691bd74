use super::*;
use proptest::prelude::*;

fn online() -> CpuSet {
    CpuSet::from_cpus([0, 1])
}

fn parse(text: &str) -> Result<Schedule, ScheduleError> {
    Schedule::parse(text, "sched.toml", &online())
}

fn rule_at(text: &str) -> (Rule, Location) {
    match parse(text).unwrap_err() {
        ScheduleError::Invalid { rule, location, .. } => (rule, location),
        e => panic!("{e}"),
    }
}

const FIG2: &str = r#"
tick = "5ms"
major_frame = 6
[[subsystem]]
name = "A"
start = 0
period = 3
cpu = 1
class = "rt0"
[[subsystem]]
name = "B"
period = 1
class = "rt1"
priority = 70
[[subsystem]]
name = "C"
start = 3
period = 6
process = "./c-program"
args = ["--fast"]
"#;

#[test]
fn figure_2_reads_with_its_rates() {
    let sut = parse(FIG2).unwrap();
    assert_eq!(sut.name, "sched");
    assert_eq!(sut.tick, Nanos::from_millis(5));
    assert_eq!(sut.wait, WaitSpec::Hybrid { margin: None });
    let [a, b, c] = &sut.subsystems[..] else {
        panic!()
    };
    assert!((a.frequency_hz(sut.tick) - 66.666).abs() < 0.01);
    assert!((b.frequency_hz(sut.tick) - 200.0).abs() < 0.01);
    assert!((c.frequency_hz(sut.tick) - 33.333).abs() < 0.01);
    assert_eq!(a.class, Class::Rt0 { cpu: 1 });
    assert_eq!(
        c.process,
        Process::Program {
            program: "./c-program".into(),
            args: vec!["--fast".into()]
        }
    );
    let at3: Vec<&str> = sut.released_at(3).map(|s| s.name.as_str()).collect();
    assert_eq!(at3, ["A", "B", "C"]);
    let at4: Vec<&str> = sut.released_at(4).map(|s| s.name.as_str()).collect();
    assert_eq!(at4, ["B"]);
    assert_eq!(c.releases_before(3), 0);
    assert_eq!(c.releases_before(4), 1);
    assert_eq!(a.releases_before(7), 3);
}

#[test]
fn a_syntax_error_names_its_line_and_column() {
    let (rule, at) = rule_at("tick = \"1ms\"\nmajor_frame = = 3\n");
    assert!(matches!(rule, Rule::Syntax(_)), "{rule}");
    assert_eq!(at.line, 2);
}

#[test]
fn an_unknown_key_is_refused_where_it_stands() {
    let (rule, at) =
        rule_at("tick = \"1ms\"\nmajor_frame = 3\n[[subsystem]]\nname = \"a\"\n  prio = 3\n");
    assert!(
        matches!(rule, Rule::Syntax(ref m) if m.contains("prio")),
        "{rule}"
    );
    assert_eq!(at, Location { line: 5, column: 3 });
}

#[test]
fn pm_qos_reads_off_a_number_of_microseconds_or_a_bound_with_its_unit() {
    let with = |v: &str| {
        parse(&format!(
            "tick = \"1ms\"\nmajor_frame = 1\npm_qos = {v}\n[[subsystem]]\nname = \"a\"\n"
        ))
        .unwrap()
        .pm_qos
    };
    assert_eq!(with("\"off\""), Some(PmQos::Off));
    assert_eq!(with("20"), Some(PmQos::Bound(20)));
    assert_eq!(with("\"20us\""), Some(PmQos::Bound(20)));
    assert_eq!(parse(FIG2).unwrap().pm_qos, None);
}

#[test]
fn a_pm_qos_that_is_not_off_nor_a_bound_is_refused_where_it_stands() {
    let text = "tick = \"1ms\"\nmajor_frame = 1\npm_qos = \"fast\"\n[[subsystem]]\nname = \"a\"\n";
    let (rule, at) = rule_at(text);
    assert_eq!(rule, Rule::PmQos("fast".into()));
    assert_eq!(
        at,
        Location {
            line: 3,
            column: 10
        }
    );
    let (rule, _) = rule_at(&text.replace("\"fast\"", "-5"));
    assert_eq!(rule, Rule::PmQos("-5".into()));
}

#[test]
fn a_silence_is_two_ticks_or_more_and_the_safe_state_a_state() {
    let text = |extra: &str| {
        format!(
            "tick = \"4ms\"\nmajor_frame = 1\nmodes = [\"hold\"]\n{extra}[[subsystem]]\nname = \"a\"\n"
        )
    };
    let s = parse(&text("")).unwrap();
    assert_eq!(s.silence_bound(), Nanos::from_millis(200));
    assert_eq!(s.safe_state, "off");
    let s = parse(&text("silence = \"12ms\"\nsafe_state = \"HOLD\"\n")).unwrap();
    assert_eq!(s.silence_bound(), Nanos::from_millis(12));
    assert_eq!(s.safe_state, "hold");
    let (rule, at) = rule_at(&text("silence = \"5ms\"\n"));
    assert!(matches!(rule, Rule::SilenceTooShort { .. }), "{rule:?}");
    assert_eq!((at.line, at.column), (4, 11));
    let (rule, at) = rule_at(&text("safe_state = \"hover\"\n"));
    assert_eq!(rule, Rule::UnknownState("hover".into()));
    assert_eq!((at.line, at.column), (4, 14));
}

#[test]
fn an_explain_threshold_is_a_duration_longer_than_zero() {
    let text = |v: &str| {
        format!(
            "tick = \"1ms\"\nmajor_frame = 1\nexplain_threshold = \"{v}\"\n[[subsystem]]\nname = \"a\"\n"
        )
    };
    assert_eq!(
        parse(&text("300us")).unwrap().explain_threshold,
        Some(Nanos::from_micros(300))
    );
    let (rule, at) = rule_at(&text("0s"));
    assert_eq!(rule, Rule::ZeroExplainThreshold);
    assert_eq!(
        at,
        Location {
            line: 3,
            column: 21
        }
    );
}

#[test]
fn two_rt0_on_one_cpu_are_refused_at_the_second() {
    let text = "tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\ncpu = 1\nclass = \"rt0\"\n[[subsystem]]\nname = \"b\"\ncpu = 1\nclass = \"rt0\"\n";
    let (rule, at) = rule_at(text);
    assert_eq!(
        rule,
        Rule::TwoRt0 {
            cpu: 1,
            first: "a".into()
        }
    );
    assert_eq!(at, Location { line: 9, column: 7 });
}

#[test]
fn an_offline_cpu_and_a_duplicate_name_are_refused() {
    let (rule, _) =
        rule_at("tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\ncpu = 7\n");
    assert!(matches!(rule, Rule::CpuOffline { cpu: 7, .. }));
    let (rule, at) = rule_at(
        "tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\n[[subsystem]]\nname = \"a\"\n",
    );
    assert!(matches!(rule, Rule::DuplicateName { .. }), "{rule}");
    assert_eq!(at.line, 6);
}

#[test]
fn bad_durations_and_wait_modes_are_refused() {
    let (rule, at) = rule_at("tick = \"fast\"\nmajor_frame = 2\n");
    assert_eq!(rule, Rule::BadDuration("fast".into()));
    assert_eq!(at, Location { line: 1, column: 8 });
    let (rule, _) = rule_at(
        "tick = \"1ms\"\nmajor_frame = 2\nwait = \"spin\"\nmargin = \"10us\"\n[[subsystem]]\nname = \"a\"\n",
    );
    assert_eq!(rule, Rule::MarginWithoutHybrid);
    let (rule, _) =
        rule_at("tick = \"1ms\"\nmajor_frame = 2\nwait = \"poll\"\n[[subsystem]]\nname = \"a\"\n");
    assert_eq!(rule, Rule::UnknownWait("poll".into()));
}

#[test]
fn groups_share_their_cadence_and_stay_in_process() {
    let (rule, _) = rule_at(
        "tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\ngroup = \"g\"\n[[subsystem]]\nname = \"b\"\nperiod = 2\ngroup = \"g\"\n",
    );
    assert!(matches!(rule, Rule::GroupCadence { .. }));
    let (rule, _) = rule_at(
        "tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\nprocess = \"x\"\ngroup = \"g\"\n",
    );
    assert_eq!(rule, Rule::GroupAcrossProcesses);
}

#[test]
fn a_hub_homed_on_an_unknown_host_is_refused_at_its_host() {
    let lines = HOSTS.lines().count();
    let hub = "[[hub]]\nname = \"s\"\nkind = \"semaphore\"\nhost = \"h2\"\n";
    let ok = parse(&format!("{HOSTS}{hub}")).unwrap();
    assert_eq!(ok.hubs[0].host(), Some("h2"));
    let (rule, place) = rule_at(&format!("{HOSTS}{}", hub.replace("h2", "h9")));
    assert!(
        matches!(&rule, Rule::UnknownHost { name, known } if name == "h9" && known.join(",") == "main,h2"),
        "{rule:?}"
    );
    assert_eq!(
        place,
        Location {
            line: lines + 4,
            column: 8
        }
    );
    let (rule, _) = rule_at(&format!("{FIG2}\n{hub}"));
    assert_eq!(rule, Rule::HostWithoutHosts);
}

const HOSTS: &str = "tick = \"1ms\"\nmajor_frame = 3\n\
    [[host]]\nname = \"main\"\naddress = \"10.77.0.1:7447\"\n\
    [[host]]\nname = \"h2\"\naddress = \"10.77.0.2:7447\"\n\
    [[subsystem]]\nname = \"A\"\n\
    [[subsystem]]\nname = \"B\"\nhost = \"h2\"\ncpu = 15\n";

#[test]
fn a_host_table_places_each_subsystem_and_leaves_remote_cpus_to_their_host() {
    let sut = parse(HOSTS).unwrap();
    assert_eq!(sut.hosts.len(), 2);
    assert_eq!(sut.hosts[1].name, "h2");
    assert_eq!(sut.hosts[1].address, "10.77.0.2:7447".parse().unwrap());
    assert_eq!(sut.hosts[1].location, Location { line: 7, column: 8 });
    // A runs on the main host (no `host`), B on h2, whose CPU 15 is not ours.
    assert_eq!(
        sut.subsystems.iter().map(|s| s.host).collect::<Vec<_>>(),
        [0, 1]
    );
    let one_host = parse("tick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n").unwrap();
    assert!(one_host.hosts.is_empty());
    assert_eq!(one_host.subsystems[0].host, 0);
}

#[test]
fn on_error_is_read_and_an_unknown_one_is_refused_at_its_value() {
    use crate::subsystem::OnError;
    let base = "tick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n";
    assert_eq!(parse(base).unwrap().subsystems[0].on_error, OnError::Stop);
    for o in [OnError::Stop, OnError::Continue, OnError::StopRun] {
        let text = format!("{base}on_error = \"{}\"\n", o.name());
        assert_eq!(parse(&text).unwrap().subsystems[0].on_error, o);
    }
    let (rule, at) = rule_at(&format!("{base}on_error = \"retry\"\n"));
    assert_eq!(rule, Rule::UnknownOnError("retry".into()));
    assert_eq!((at.line, at.column), (5, 12));
}

#[test]
fn on_overrun_and_watchdog_are_read() {
    let base = "tick = \"1ms\"\nmajor_frame = 1\nmodes = [\"safe\"]\n[[subsystem]]\nname = \"a\"\n";
    let a = &parse(base).unwrap().subsystems[0];
    assert_eq!(a.on_overrun, OnOverrun::default());
    assert_eq!(a.on_overrun.action, OverrunAction::Count);
    assert_eq!(a.watchdog, None);
    for (text, action) in [
        ("on_overrun = \"count\"\n", OverrunAction::Count),
        ("on_overrun = \"warn\"\n", OverrunAction::Warn),
        ("on_overrun = \"stop-run\"\n", OverrunAction::StopRun),
        (
            "on_overrun = \"mode\"\noverrun_mode = \"Safe\"\n",
            OverrunAction::Mode("safe".into()),
        ),
        (
            "on_overrun = \"mode\"\noverrun_mode = \"pause\"\n",
            OverrunAction::Mode("pause".into()),
        ),
    ] {
        let s = parse(&format!("{base}{text}")).unwrap();
        assert_eq!(s.subsystems[0].on_overrun.action, action, "{text}");
        assert_eq!(s.subsystems[0].on_overrun.after, 1, "{text}");
    }
    // The run's watchdog is every subsystem's, unless it sets its own.
    let run =
        format!("watchdog = \"1s\"\n{base}\n[[subsystem]]\nname = \"b\"\nwatchdog = \"5ms\"\n");
    let s = parse(&run).unwrap();
    assert_eq!(s.subsystems[0].watchdog, Some(Nanos::from_secs(1)));
    assert_eq!(s.subsystems[1].watchdog, Some(Nanos::from_millis(5)));
    let (rule, at) = rule_at(&format!("watchdog = \"0s\"\n{base}"));
    assert_eq!((rule, at.line, at.column), (Rule::ZeroWatchdog, 1, 12));
    let text = format!("{base}on_overrun = \"warn\"\noverrun_after = 3\nwatchdog = \"50ms\"\n");
    let a = &parse(&text).unwrap().subsystems[0];
    assert_eq!(a.on_overrun.after, 3);
    assert_eq!(a.watchdog, Some(Nanos::from_millis(50)));
}

#[test]
fn a_bad_on_overrun_or_watchdog_is_refused_at_its_value() {
    let base = "tick = \"1ms\"\nmajor_frame = 1\nmodes = [\"safe\"]\n[[subsystem]]\nname = \"a\"\n";
    // (the keys added, the rule expected, its line and column)
    let cases: [(&str, Rule, (usize, usize)); 7] = [
        (
            "on_overrun = \"panic\"\n",
            Rule::UnknownOnOverrun("panic".into()),
            (6, 14),
        ),
        (
            "on_overrun = \"mode\"\noverrun_mode = \"hover\"\n",
            Rule::UnknownState("hover".into()),
            (7, 16),
        ),
        ("on_overrun = \"mode\"\n", Rule::OverrunModeMissing, (6, 14)),
        (
            "on_overrun = \"warn\"\noverrun_mode = \"safe\"\n",
            Rule::OverrunModeWithoutMode,
            (7, 16),
        ),
        (
            "overrun_mode = \"safe\"\n",
            Rule::OverrunModeWithoutMode,
            (6, 16),
        ),
        (
            "on_overrun = \"warn\"\noverrun_after = 0\n",
            Rule::ZeroOverrunAfter,
            (7, 17),
        ),
        ("watchdog = \"0ms\"\n", Rule::ZeroWatchdog, (6, 12)),
    ];
    for (keys, expected, (line, column)) in cases {
        let (rule, at) = rule_at(&format!("{base}{keys}"));
        assert_eq!(rule, expected, "{keys}");
        assert_eq!((at.line, at.column), (line, column), "{keys}");
    }
    let (rule, at) = rule_at(&format!("{base}watchdog = \"soon\"\n"));
    assert_eq!(rule, Rule::BadDuration("soon".into()));
    assert_eq!((at.line, at.column), (6, 12));
}

#[test]
fn a_malformed_host_table_is_refused_at_its_place() {
    // (text replaced, its replacement, the rule expected, where)
    type Case = (&'static str, &'static str, fn(&Rule) -> bool, Location);
    let cases: [Case; 7] = [
        (
            "address = \"10.77.0.1:7447\"",
            "address = \"10.77.0.1\"",
            |r| matches!(r, Rule::BadAddress(_)),
            Location {
                line: 5,
                column: 11,
            },
        ),
        (
            "address = \"10.77.0.1:7447\"",
            "address = \"10.77.0.1:0\"",
            |r| *r == Rule::PortZero,
            Location {
                line: 5,
                column: 11,
            },
        ),
        (
            "address = \"10.77.0.2:7447\"",
            "address = \"10.77.0.1:7447\"",
            |r| matches!(r, Rule::DuplicateAddress { first, .. } if first == "main"),
            Location {
                line: 8,
                column: 11,
            },
        ),
        (
            "name = \"h2\"\naddress",
            "name = \"main\"\naddress",
            |r| matches!(r, Rule::DuplicateHost { name, .. } if name == "main"),
            Location { line: 7, column: 8 },
        ),
        (
            "name = \"h2\"\naddress",
            "name = \"h 2\"\naddress",
            |r| matches!(r, Rule::BadName(_)),
            Location { line: 7, column: 8 },
        ),
        (
            "host = \"h2\"",
            "host = \"h9\"",
            |r| matches!(r, Rule::UnknownHost { known, .. } if known.join(",") == "main,h2"),
            Location {
                line: 13,
                column: 8,
            },
        ),
        (
            "address = \"10.77.0.1:7447\"",
            "address = \"10.77.0.1:7447\"\nport = 1",
            |r| matches!(r, Rule::Syntax(m) if m.contains("port")),
            Location { line: 6, column: 1 },
        ),
    ];
    for (from, to, expected, at) in cases {
        let (rule, place) = rule_at(&HOSTS.replacen(from, to, 1));
        assert!(expected(&rule), "{to}: {rule:?}");
        assert_eq!(place, at, "{to}: {rule}");
    }
    // A group of A (main) and B (h2): one spin rendezvous cannot span hosts.
    let text = HOSTS
        .replacen("name = \"A\"", "name = \"A\"\ngroup = \"g\"", 1)
        .replace("cpu = 15", "cpu = 15\ngroup = \"g\"");
    let (rule, place) = rule_at(&text);
    assert!(matches!(rule, Rule::GroupAcrossHosts { .. }), "{rule:?}");
    assert_eq!(
        place,
        Location {
            line: 16,
            column: 9
        },
        "{text}"
    );
    // `host` without any [[host]] table.
    let (rule, place) =
        rule_at("tick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\nhost = \"h2\"\n");
    assert_eq!(rule, Rule::HostWithoutHosts);
    assert_eq!(place, Location { line: 5, column: 8 });
}

const HUBS: &str = "tick = \"1ms\"\nmajor_frame = 2\n[[subsystem]]\nname = \"a\"\n[[hub]]\nname = \"ready\"\nkind = \"semaphore\"\n[[hub]]\nname = \"forces\"\nkind = \"fifo\"\ntype = \"f32\"\nlen = 3\ncapacity = 16\n";

#[test]
fn hub_tables_are_read_in_order() {
    let sut = parse(HUBS).unwrap();
    assert_eq!(
        sut.hubs,
        [
            HubDecl::semaphore("ready", 0),
            HubDecl::fifo::<[f32; 3]>("forces", 16)
        ]
    );
    assert!(parse(FIG2).unwrap().hubs.is_empty());
}

#[test]
fn a_duplicate_or_broken_hub_is_refused_where_it_stands() {
    let text = format!("{HUBS}[[hub]]\nname = \"ready\"\nkind = \"event\"\n");
    let (rule, at) = rule_at(&text);
    assert_eq!(
        rule,
        Rule::DuplicateHub {
            name: "ready".into(),
            first: Location { line: 6, column: 8 }
        }
    );
    assert_eq!(
        at,
        Location {
            line: 15,
            column: 8
        }
    );
    let text = format!("{HUBS}[[hub]]\nname = \"q\"\nkind = \"fifo\"\ntype = \"f32\"\n");
    let (rule, at) = rule_at(&text);
    assert!(
        matches!(rule, Rule::Hub(ref m) if m.contains("capacity")),
        "{rule}"
    );
    assert_eq!(
        at,
        Location {
            line: 15,
            column: 8
        }
    );
    let (rule, _) = rule_at(&format!("{HUBS}[[hub]]\nname = \"x\"\nkind = \"pipe\"\n"));
    assert!(
        matches!(rule, Rule::Hub(ref m) if m.contains("pipe")),
        "{rule}"
    );
}

#[test]
fn the_tick_and_the_major_frame_are_bounded() {
    let (rule, at) = rule_at("tick = \"2s\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n");
    assert_eq!(
        rule,
        Rule::TickOutOfRange {
            tick: Nanos::from_secs(2)
        }
    );
    assert_eq!(at, Location { line: 1, column: 8 });
    let (rule, _) = rule_at("tick = \"500ns\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n");
    assert!(matches!(rule, Rule::TickOutOfRange { .. }), "{rule}");
    let (rule, at) =
        rule_at("tick = \"1ms\"\nmajor_frame = 1000000\n[[subsystem]]\nname = \"a\"\n");
    assert_eq!(
        rule,
        Rule::MajorPeriodTooLong {
            tick: Nanos::from_millis(1),
            major_frame: 1_000_000
        }
    );
    assert_eq!(
        at,
        Location {
            line: 2,
            column: 15
        }
    );
    let (rule, _) = rule_at(&format!(
        "tick = \"1s\"\nmajor_frame = {}\n[[subsystem]]\nname = \"a\"\n",
        u64::MAX
    ));
    assert!(matches!(rule, Rule::MajorPeriodTooLong { .. }), "{rule}");
    let (rule, _) = rule_at("tick = \"1000years\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n");
    assert_eq!(rule, Rule::DurationTooLong("1000years".into()));
    assert!(parse("tick = \"1ms\"\nmajor_frame = 10000\n[[subsystem]]\nname = \"a\"\n").is_ok());
}

#[test]
fn a_replacement_tick_obeys_the_rules_of_the_file() {
    let text =
        "tick = \"5ms\"\nmajor_frame = 20\nmargin = \"200us\"\n[[subsystem]]\nname = \"a\"\n";
    let mut sut = parse(text).unwrap();
    let err = sut.with_tick(Nanos::from_micros(100)).unwrap_err();
    assert!(
        matches!(err.rule(), Some(Rule::MarginTooLong { .. })),
        "{err}"
    );
    assert!(err.to_string().starts_with("sched.toml:3:10: "), "{err}");
    let err = sut.with_tick(Nanos::from_secs(2)).unwrap_err();
    assert!(
        matches!(err, ScheduleError::Given { .. })
            && err.to_string().starts_with("the tick 2.00 s is outside"),
        "the file's tick is not the one refused: {err}"
    );
    let err = sut.with_tick(Nanos::MAX).unwrap_err();
    assert!(
        matches!(err.rule(), Some(Rule::TickOutOfRange { .. })),
        "{err}"
    );
    let err = sut.with_tick(Nanos::from_secs(1)).unwrap_err();
    assert!(
        matches!(err.rule(), Some(Rule::MajorPeriodTooLong { .. })),
        "{err}"
    );
    assert_eq!(sut.tick, Nanos::from_millis(5), "unchanged on a refusal");
    sut.with_tick(Nanos::from_millis(1)).unwrap();
    assert_eq!(sut.major_period(), Nanos::from_millis(20));
}

const RING: &str = "tick = \"1ms\"\nmajor_frame = 1\n[stress]\ncounters = [\"A.x\", \"B.x\"]\n[[cell]]\nname = \"A\"\nelements = [ { name = \"x\", type = \"i32\" } ]\n[[cell]]\nname = \"B\"\nelements = [ { name = \"x\", type = \"i32\" } ]\n[[subsystem]]\nname = \"a\"\nbuiltin = \"increment\"\nconfig = { from = \"A\", to = \"B\" }\n";

#[test]
fn builtins_and_counters_are_checked_against_the_cells_where_they_stand() {
    assert!(parse(RING).is_ok());
    let (rule, at) = rule_at(&RING.replace("to = \"B\"", "to = \"Z\""));
    assert_eq!(
        rule,
        Rule::Builtin {
            subsystem: "a".into(),
            message: "config.to: there is no cell `Z`".into()
        }
    );
    assert_eq!(
        at,
        Location {
            line: 14,
            column: 29
        }
    );
    let (rule, at) = rule_at(&RING.replace("\"increment\"", "\"incremnt\""));
    assert!(
        matches!(rule, Rule::Builtin { ref message, .. } if message.contains("unknown builtin 'incremnt'")),
        "{rule}"
    );
    assert_eq!(
        at,
        Location {
            line: 13,
            column: 11
        }
    );
    let (rule, at) = rule_at(&RING.replace("config = { from = \"A\", to = \"B\" }\n", ""));
    assert!(
        matches!(rule, Rule::Builtin { ref message, .. } if message.contains("config.from")),
        "{rule}"
    );
    assert_eq!(at.line, 12);
    let (rule, at) = rule_at(&RING.replace("\"B.x\"]", "\"Q.int\"]"));
    assert_eq!(
        rule,
        Rule::Counter {
            counter: "Q.int".into(),
            message: "there is no cell `Q`".into()
        }
    );
    assert_eq!(
        at,
        Location {
            line: 4,
            column: 20
        }
    );
}

#[test]
fn the_record_table_names_known_cells_and_a_positive_every() {
    let sut = parse(RING).unwrap();
    assert_eq!(sut.record, RecordSpec::default());
    let text = format!("{RING}[record]\ncells = [\"B\", \"A\"]\nevery = 3\n");
    let sut = parse(&text).unwrap();
    assert_eq!(
        sut.record,
        RecordSpec {
            cells: Some(vec!["B".into(), "A".into()]),
            every: 3
        }
    );
    let (rule, at) = rule_at(&format!("{RING}[record]\ncells = [\"A\", \"Q\"]\n"));
    assert_eq!(rule, Rule::UnknownRecordedCell("Q".into()));
    assert_eq!(
        at,
        Location {
            line: 16,
            column: 15
        }
    );
    let (rule, at) = rule_at(&format!("{RING}[record]\nevery = 0\n"));
    assert_eq!(rule, Rule::ZeroRecordEvery);
    assert_eq!(
        at,
        Location {
            line: 16,
            column: 9
        }
    );
    let (rule, _) = rule_at(&format!("{RING}[record]\nevry = 2\n"));
    assert!(
        matches!(rule, Rule::Syntax(ref m) if m.contains("evry")),
        "{rule}"
    );
}

#[test]
fn a_cell_file_is_checked_on_load_and_placed_when_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let cells: String = RING
        .split("[[subsystem]]")
        .next()
        .unwrap()
        .split("[[cell]]")
        .skip(1)
        .map(|c| format!("[[cell]]{c}"))
        .collect();
    std::fs::write(dir.path().join("cells.toml"), &cells).unwrap();
    let text = RING
        .replace("[[cell]]", "[[old]]")
        .split("[[old]]")
        .next()
        .unwrap()
        .to_string()
        + "cells = \"cells.toml\"\n[[subsystem]]\nname = \"a\"\nbuiltin = \"increment\"\nconfig = { from = \"A\", to = \"Z\" }\n";
    let text = text.replace("[stress]\ncounters = [\"A.x\", \"B.x\"]\n", "");
    let path = dir.path().join("s.toml");
    std::fs::write(&path, &text).unwrap();
    let sut = Schedule::parse(&text, &path, &online()).unwrap();
    let err = sut.cell_table().unwrap_err();
    assert!(
        err.to_string().starts_with(&format!(
            "{}:7:29: subsystem 'a': config.to",
            path.display()
        )),
        "{err}"
    );
    let err = Schedule::from_file(&path, &online()).unwrap_err();
    assert!(matches!(err.rule(), Some(Rule::Builtin { .. })), "{err}");
    std::fs::remove_file(dir.path().join("cells.toml")).unwrap();
    let err = Schedule::from_file(&path, &online()).unwrap_err();
    assert!(matches!(err.rule(), Some(Rule::CellFile { .. })), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "{}:3:9: cannot read the cell file",
            path.display()
        )),
        "{err}"
    );
    let cells = dir.path().join("cells.toml");
    std::fs::write(&cells, b"[[cell]]\nname = \"\xff\"\n").unwrap();
    let err = Schedule::from_file(&path, &online()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}:2:9: invalid UTF-8", cells.display())
    );
}

#[test]
fn unreadable_schedule_files_are_refused_where_they_break() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, b"tick = \"1ms\"\nname = \"r\xffn\"\n").unwrap();
    let err = Schedule::from_file(&path, &online()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}:2:10: invalid UTF-8", path.display())
    );
    let err = Schedule::from_file(dir.path(), &online()).unwrap_err();
    assert_eq!(err.rule(), Some(&Rule::NotAFile("a directory")));
    let err = Schedule::from_file(&dir.path().join("none.toml"), &online()).unwrap_err();
    assert!(matches!(err, ScheduleError::Io { .. }));
    assert_eq!(
        err.to_string(),
        format!("cannot read {}", dir.path().join("none.toml").display())
    );
}

#[test]
fn location_counts_characters_not_bytes() {
    assert_eq!(
        Location::of("é = 1\nab", 7),
        Location { line: 2, column: 1 }
    );
    assert_eq!(Location::of("éa", 2), Location { line: 1, column: 2 });
    assert_eq!(Location::of("x", 99), Location { line: 1, column: 2 });
}

/// One generated subsystem line: each field may be absent, valid or not.
#[derive(Clone, Debug)]
struct Gen {
    name: u8,
    start: u64,
    period: u64,
    cpu: Option<usize>,
    class: u8,
    priority: Option<u8>,
}

fn gen_subsystem() -> impl Strategy<Value = Gen> {
    (
        0u8..6,
        0u64..8,
        0u64..9,
        proptest::option::of(0usize..4),
        0u8..4,
        proptest::option::of(0u8..101),
    )
        .prop_map(|(name, start, period, cpu, class, priority)| Gen {
            name,
            start,
            period,
            cpu,
            class,
            priority,
        })
}

const CLASSES: [&str; 4] = ["rt0", "rt1", "normal", "rt2"];

fn render(major: u64, subs: &[Gen]) -> String {
    let mut t = format!("tick = \"1ms\"\nmajor_frame = {major}\n");
    for s in subs {
        t += &format!(
            "[[subsystem]]\nname = \"s{}\"\nstart = {}\nperiod = {}\nclass = \"{}\"\n",
            s.name, s.start, s.period, CLASSES[s.class as usize]
        );
        if let Some(c) = s.cpu {
            t += &format!("cpu = {c}\n");
        }
        if let Some(p) = s.priority {
            t += &format!("priority = {p}\n");
        }
    }
    t
}

/// The rules, stated independently of the parser.
fn oracle(major: u64, subs: &[Gen], online: &CpuSet) -> bool {
    if major == 0 || subs.is_empty() {
        return false;
    }
    let names: BTreeSet<u8> = subs.iter().map(|s| s.name).collect();
    if names.len() != subs.len() {
        return false;
    }
    let mut rt0 = BTreeSet::new();
    subs.iter().all(|s| {
        let class = CLASSES[s.class as usize];
        s.period >= 1
            && s.period <= major
            && major.is_multiple_of(s.period)
            && s.start < s.period
            && s.cpu.is_none_or(|c| online.contains(c))
            && class != "rt2"
            && (class == "rt1" || s.priority.is_none())
            && (class != "rt1" || s.priority.is_none_or(|p| (1..=98).contains(&p)))
            && (class != "rt0" || s.cpu.is_some_and(|c| rt0.insert(c)))
    })
}

proptest! {
    #[test]
    fn validation_accepts_exactly_the_valid_schedules(
        major in 0u64..13,
        subs in proptest::collection::vec(gen_subsystem(), 0..5),
    ) {
        let text = render(major, &subs);
        let got = parse(&text);
        prop_assert_eq!(got.is_ok(), oracle(major, &subs, &online()), "{}\n{:?}", text, got.err().map(|e| e.to_string()));
        if let Ok(s) = got {
            // Every frame of a major frame releases each subsystem exactly as its
            // period says, and the pattern repeats.
            for sub in &s.subsystems {
                let n = (0..major).filter(|&f| sub.releases_at(f)).count() as u64;
                prop_assert_eq!(n, major / sub.period);
                prop_assert_eq!(sub.releases_before(3 * major), 3 * n);
            }
        }
    }

    #[test]
    fn a_broken_rule_always_points_inside_the_file(
        major in 0u64..13,
        subs in proptest::collection::vec(gen_subsystem(), 0..5),
    ) {
        let text = render(major, &subs);
        if let Err(ScheduleError::Invalid { location, .. }) = parse(&text) {
            let lines = text.lines().count().max(1);
            prop_assert!(location.line >= 1 && location.line <= lines + 1);
        }
    }
}

#[test]
fn writes_name_known_cells_or_elements_and_a_builtins_follow_from_its_config() {
    // The increment builtin writes its `to` cell without saying so.
    let sut = parse(RING).unwrap();
    assert_eq!(sut.subsystems[0].writes, Some(vec!["B".to_string()]));
    let table = sut.cell_table().unwrap();
    assert_eq!(sut.host_writes(&table, 0), Some(vec![vec![], vec![0..4]]));
    // Said: cells and elements, merged per cell for the host.
    let text = format!(
        "{RING}[[subsystem]]\nname = \"w\"\nprocess = \"./w\"\nwrites = [\"A.x\", \"A\"]\n"
    );
    let sut = parse(&text).unwrap();
    assert_eq!(
        sut.subsystems[1].writes,
        Some(vec!["A.x".to_string(), "A".to_string()])
    );
    assert_eq!(
        sut.host_writes(&sut.cell_table().unwrap(), 0),
        Some(vec![vec![0..4], vec![0..4]])
    );
    // A subsystem that does not say leaves its host's writes unsaid.
    let text = format!("{RING}[[subsystem]]\nname = \"w\"\nprocess = \"./w\"\n");
    let sut = parse(&text).unwrap();
    assert_eq!(sut.host_writes(&sut.cell_table().unwrap(), 0), None);
    // An unknown cell or element is refused where it stands.
    let (rule, at) = rule_at(&format!(
        "{RING}[[subsystem]]\nname = \"w\"\nprocess = \"./w\"\nwrites = [\"A\", \"B.y\"]\n"
    ));
    assert!(
        matches!(&rule, Rule::UnknownWrite { subsystem, .. } if subsystem == "w"),
        "{rule:?}"
    );
    assert_eq!((at.line, at.column), (18, 16), "at \"B.y\"");
    assert!(rule.to_string().contains("writes:"), "{rule}");
}
