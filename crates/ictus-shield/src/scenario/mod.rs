//! The load-balancer tester (seed 002 §5.3.1, `lbμ`): a scenario declares groups of
//! fake tasks (count, CPUs, class, compute amount, sleeps, sections that endanger
//! latency); they all start together, under stock Linux placement or under the ictus
//! balancer, and the run reports per task and per group the completion time, the share
//! of time on each CPU, context switches and migrations, per CPU the idle time, and —
//! beyond `lbμ`, its own listed future work — a timeline of how many tasks of each
//! group were running on each CPU.
//!
//! - [`spec`]: the TOML file, checked, every refusal with its file, line and column.
//! - [`run`](mod@run): the runner and the [`ScenarioResult`] it returns.
//!
//! ```no_run
//! use std::path::Path;
//! use ictus_shield::scenario::{self, BalancerMode, WatchFlow, ScenarioOptions};
//! let s = scenario::spec::load(Path::new("examples/scenarios/table3-2cpu.toml"))?;
//! let result = scenario::run(&s, &ScenarioOptions::new(BalancerMode::Ictus), |p| {
//!     eprintln!("{}/{} tasks done", p.finished, p.tasks);
//!     WatchFlow::Continue
//! })?;
//! println!("{}", serde_json::to_string_pretty(&result)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod run;
pub mod spec;

pub use run::{
    BalancerMode, RESULT_SCHEMA, RESULT_VERSION, ScenarioError, ScenarioOptions, ScenarioProgress,
    ScenarioResult, WatchFlow, run,
};
pub use spec::{Scenario, SpecError};
