//! A 10 kHz haptic-style loop: one mass-interaction model split over two CPUs that
//! meet at a spin rendezvous inside every step. See `examples/haptic/schedule.toml`.
//!
//! ```text
//! cargo run --release -p ictus-exec --example haptic -- examples/haptic/schedule.toml --duration 5s [--record run.mcap] [--trace run.json] [--report report.json]
//! ```

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ictus_core::mass::{Model, Params, Part};
use ictus_exec::program::Executive;
use ictus_exec::run::RunOptions;
use ictus_exec::schedule::Schedule;
use ictus_exec::state::StateId;
use ictus_exec::subsystem::{Flow, Frame, Output, Registry, RegistryError, Subsystem};

/// One CPU's share of the model. The part that owns the device's end moves it and
/// publishes the force on it.
struct HapticPart {
    model: Arc<Model>,
    part: Part,
    /// The device's outputs (force, position), on the part that owns its end.
    device: Option<(Output<f64>, Output<f64>)>,
}

/// What a part is made of: the whole model, its share, and whether it owns the
/// device's end (`config.device`).
#[derive(serde::Deserialize)]
struct Settings {
    #[serde(default)]
    device: bool,
}

impl HapticPart {
    fn init_with(
        reg: &mut Registry,
        model: Arc<Model>,
        part: Part,
    ) -> Result<HapticPart, RegistryError> {
        let Settings { device } = reg.settings()?;
        let device = if device {
            Some((reg.output("haptic.force")?, reg.output("haptic.position")?))
        } else {
            None
        };
        Ok(HapticPart {
            model,
            part,
            device,
        })
    }
}

impl Subsystem for HapticPart {
    type Error = RegistryError;

    /// Made only by `init_with` (it needs the model): this says so.
    fn init(reg: &mut Registry) -> Result<Self, RegistryError> {
        Err(RegistryError::Config {
            subsystem: reg.name().to_string(),
            message: "a haptic part is made with its share of the model".into(),
        })
    }

    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        if frame.state() != StateId::RUN {
            return Ok(Flow::Continue);
        }
        // Forces, rendezvous, integration, rendezvous: the fully synchronous step.
        self.model.step_part(&self.part, || frame.rendezvous());
        if let Some((force, position)) = &self.device {
            // The device: a 1 mm, 1 Hz sine on point 0, the string's fixed left end,
            // which this part owns; moved after its integration, before the next step.
            let t = frame.time().as_secs_f64();
            let x = 1e-3 * (2.0 * std::f64::consts::PI * t).sin();
            self.model.set_position(0, x);
            frame.set(position, x);
            frame.set(force, self.model.force_on(0));
        }
        Ok(Flow::Continue)
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut path = "examples/haptic/schedule.toml".to_string();
    let mut duration = Duration::from_secs(5);
    let mut report_path: Option<String> = None;
    let mut record: Option<String> = None;
    let mut trace: Option<String> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--report" => {
                let Some(p) = args.next() else {
                    return fail("--report needs a file (the run's report, JSON)");
                };
                report_path = Some(p);
            }
            "--record" => {
                let Some(p) = args.next() else {
                    return fail("--record needs a file (the recording, MCAP)");
                };
                record = Some(p);
            }
            "--trace" => {
                let Some(p) = args.next() else {
                    return fail("--trace needs a file (the timeline, Chrome/Perfetto JSON)");
                };
                trace = Some(p);
            }
            "--duration" => {
                let Some(d) = args.next().and_then(|d| humantime::parse_duration(&d).ok()) else {
                    return fail("--duration needs a duration (e.g. 5s)");
                };
                duration = d;
            }
            other => path = other.to_string(),
        }
    }
    let schedule = match Schedule::from_file(path.as_ref(), &ictus_os::facts::online_cpus()) {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    let masses = schedule
        .subsystems
        .first()
        .and_then(|s| s.config.get("masses"))
        .and_then(|v| v.as_integer())
        .unwrap_or(200) as usize;
    let params = Params {
        dt: schedule.tick,
        ..Params::default()
    };
    let model = match Model::chain(masses, &params) {
        Ok(m) => Arc::new(m),
        Err(e) => return fail(&e.to_string()),
    };
    let members = schedule.subsystems.len();
    let parts = model.partition(members);
    let names: Vec<String> = schedule.subsystems.iter().map(|s| s.name.clone()).collect();
    let mut executive = Executive::new(schedule);
    for (name, part) in names.iter().zip(parts) {
        let model = Arc::clone(&model);
        executive =
            executive.subsystem_with(name, move |reg| HapticPart::init_with(reg, model, part));
    }
    let mut sinks: Vec<Box<dyn ictus_exec::tap::Sink>> = Vec::new();
    if let Some(p) = &record {
        match ictus_exec::tap::mcap::McapSink::create(p.as_ref()) {
            Ok(sink) => sinks.push(Box::new(sink)),
            Err(e) => return fail(&format!("--record {p}: {e}")),
        }
    }
    if let Some(p) = &trace {
        let cap = ictus_capture::timeline::DEFAULT_CAP_BYTES;
        match ictus_exec::tap::timeline::TraceSink::new(p.as_ref(), cap) {
            Ok(sink) => sinks.push(Box::new(sink)),
            Err(e) => return fail(&format!("--trace {p}: {e}")),
        }
    }
    let options = RunOptions {
        duration: Some(duration),
        control_socket: false,
        sinks,
        ..RunOptions::default()
    };
    let report = match executive.options(options).run() {
        Ok(outcome) => outcome.report,
        Err(e) => return fail(&e.to_string()),
    };
    if let Some(p) = &report_path {
        let written = serde_json::to_vec_pretty(&report)
            .map_err(std::io::Error::other)
            .and_then(|j| std::fs::write(p, j));
        if let Err(e) = written {
            return fail(&format!("writing the report to {p}: {e}"));
        }
    }
    let mut out = String::new();
    out += &format!(
        "haptic: {} masses, {} steps at {} us over {} CPUs\n",
        masses,
        report.frames,
        report.tick_ns / 1_000,
        members
    );
    for s in &report.subsystems {
        let (j, e) = s
            .outcome
            .as_ref()
            .map(|o| (&o.jitter.summary, &o.exec.summary))
            .unzip();
        let us = |v: Option<ictus_core::Nanos>| {
            v.map_or("-".to_string(), |n| format!("{:.1}", n.as_micros_f64()))
        };
        out += &format!(
            "  {:<6} run {} of {}, overruns {} (longest {}), jitter p99 {} us max {} us, step p99 {} us max {} us\n",
            s.name,
            s.frames_run,
            s.releases_due,
            s.overruns,
            s.longest_overrun_streak,
            us(j.and_then(|j| j.p99_ns)),
            us(j.and_then(|j| j.max_ns)),
            us(e.and_then(|e| e.p99_ns)),
            us(e.and_then(|e| e.max_ns)),
        );
    }
    for w in &report.warnings {
        out += &format!("warning: {}\n", w.message);
    }
    for line in report.tap.iter().flat_map(|t| &t.written) {
        out += &format!("{line}\n");
    }
    out += &format!("model energy at the end: {:.3e} J\n", model.energy());
    let _ = std::io::stdout().write_all(out.as_bytes());
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "haptic: {message}");
    ExitCode::FAILURE
}
