//! What `ictus run`, `ictus node` and `ictus ctl` take on the command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::Failure;
use ictus_probe::cli::{OutputArgs, TraceArgs};
#[cfg(feature = "page")]
use ictus_ui::check_token;

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The schedule (TOML: tick, major frame, subsystems; see examples/stress/).
    pub(crate) schedule: PathBuf,
    /// Stop after this long (e.g. 10s, 2m); default: until Ctrl-C or `ictus ctl stop`.
    #[arg(short = 'D', long, value_parser = ictus_probe::cli::positive_duration)]
    pub(crate) duration: Option<Duration>,
    /// Override the schedule's tick (e.g. 250us): the same schedule, faster or slower.
    #[arg(long, value_parser = ictus_probe::cli::positive_duration)]
    pub(crate) tick: Option<Duration>,
    /// How long subsystems may take to start (their `init`, a program joining the
    /// run) before the run is given up (exit code 1, nothing left behind).
    #[arg(long, default_value = "10s", value_parser = ictus_probe::cli::positive_duration)]
    pub(crate) ready_timeout: Duration,
    /// No live status line.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Serve the live page (states, modes, stop, health, jitter) at this address:
    /// `IP:PORT` or `PORT` (on 127.0.0.1); port 0 picks a free one. The URL is printed
    /// at start; beyond loopback it carries a token that every request needs.
    #[arg(long, value_name = "ADDR", value_parser = ui_addr)]
    pub(crate) ui: Option<std::net::SocketAddr>,
    /// A file holding the live page's token (its first line: at least 16 letters,
    /// digits, `-` or `_`; the file readable by its owner only), or ICTUS_UI_TOKEN
    /// in the environment: never on the command line, where `ps` and the run's record
    /// would show it. Default: one made at start when the page is reachable beyond
    /// loopback.
    #[arg(long, value_name = "FILE", requires = "ui", value_parser = token_file)]
    pub(crate) ui_token_file: Option<String>,
    /// A file holding the page's read-only token (as --ui-token-file), or
    /// ICTUS_UI_READ_TOKEN: the page, its views and /metrics, never a command (for a
    /// dashboard or a Prometheus that scrapes). Default: one made at start, printed
    /// beside the page's URL.
    #[arg(long, value_name = "FILE", requires = "ui", value_parser = token_file)]
    pub(crate) ui_read_token_file: Option<String>,
    /// Take the live page's commands (states, modes, stop) from loopback without the
    /// token, as before: any user of this machine may then stop the run.
    #[arg(long, requires = "ui")]
    pub(crate) ui_open_loopback: bool,
    /// Serve `/metrics` (OpenMetrics, for Prometheus; docs/grafana-ictus.json is a
    /// dashboard) at this address without the page: `IP:PORT` or `PORT` (on
    /// 127.0.0.1); port 0 picks a free one. The URL is printed at start; beyond
    /// loopback it carries a token that every scrape needs (`?token=` or
    /// `Authorization: Bearer`). The live page (`--ui`) serves `/metrics` too.
    #[arg(long, value_name = "ADDR", value_parser = ui_addr)]
    pub(crate) metrics: Option<std::net::SocketAddr>,
    /// A file holding the token of `--metrics` (as --ui-token-file), or
    /// ICTUS_METRICS_TOKEN in the environment. Default: one made at start when
    /// `/metrics` is reachable beyond loopback.
    #[arg(long, value_name = "FILE", requires = "metrics", value_parser = token_file)]
    pub(crate) metrics_token_file: Option<String>,
    #[command(flatten)]
    pub(crate) common: RunCommon,
}

/// What `ictus run` and `ictus node` both take: what the run watches, how its links
/// are secured, its timeline and its record.
#[derive(Debug, Args)]
pub(crate) struct RunCommon {
    #[command(flatten)]
    pub(crate) watch: WatchArgs,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
    #[command(flatten)]
    pub(crate) trace: TraceArgs,
    #[command(flatten)]
    pub(crate) out: OutputArgs,
}

/// How a run across hosts secures its links.
#[derive(Debug, Args)]
pub(crate) struct TrustArgs {
    /// This host's keys: its bundle from `ictus keys new KEYS --hosts ...`
    /// (KEYS/bundles/hosts/H, copied to host H; `{host}` in the path is this host's
    /// name): every link across hosts is TLS with
    /// mutual authentication and the run's access rules. Given, it wins over the
    /// schedule's `[security]`. A folder holding another host's, a reader's or the
    /// CA's private key is refused (see --shared-keys).
    #[arg(long, value_name = "DIR", conflicts_with = "insecure")]
    pub(crate) keys: Option<PathBuf>,
    /// Use a keys folder that holds other hosts' (or readers', or the CA's) private
    /// keys, such as the whole folder `ictus keys new` made: only where every host
    /// of the run is on this machine (trials, tests), since a folder stolen from one
    /// host is then every host.
    #[arg(long, conflicts_with = "insecure")]
    pub(crate) shared_keys: bool,
    /// Links across hosts without TLS or access rules: any machine that can reach a
    /// host's port can read, write and stop the run. Warned and recorded.
    #[arg(long)]
    pub(crate) insecure: bool,
}

/// What `ictus run` and `ictus node` hold and watch around their subsystems.
#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// The CPU latency QoS held for the whole run (/dev/cpu_dma_latency): a bound in
    /// us, or off (the machine as it idles). Given, it wins over the schedule's
    /// `pm_qos`; else the schedule's, else 0 (as cyclictest).
    #[arg(long, value_name = "US|off", value_parser = ictus_probe::cli::pm_qos)]
    pub(crate) pm_qos: Option<ictus_os::pm_qos::PmQos>,
    /// Explain every miss of this host's subsystems (a sampler on the other CPUs
    /// reads what moved in each miss's window); off measures without it.
    #[arg(long, value_enum, default_value = "on")]
    pub(crate) explain: ictus_probe::cli::Switch,
    /// A release this late (or later) is a miss to explain (e.g. 200us). Given, it
    /// wins over the schedule's `explain_threshold`; else the schedule's, else the
    /// tick.
    #[arg(long, value_parser = ictus_probe::cli::positive_duration)]
    pub(crate) explain_threshold: Option<Duration>,
    /// Record this host's subsystems to an MCAP file (cells, inputs, frame timing,
    /// events; the schedule's `[record]` table says which cells): Foxglove opens
    /// it, `ictus replay` replays it (docs/recording.md).
    #[arg(long, value_name = "FILE.mcap", value_hint = clap::builder::ValueHint::FilePath)]
    pub(crate) record: Option<PathBuf>,
}

/// The live page and `/metrics` as asked (`--ui`, `--metrics` and their tokens).
#[derive(Debug, Default)]
pub(crate) struct PageAsk {
    /// The live page's address and token.
    pub(crate) ui: Option<(std::net::SocketAddr, Option<String>)>,
    /// The live page's read-only token, and whether loopback commands need none.
    #[cfg_attr(
        not(feature = "page"),
        allow(dead_code, reason = "read by the page, which this build has not")
    )]
    pub(crate) ui_read: (Option<String>, bool),
    /// `/metrics` alone: its address and token.
    pub(crate) metrics: Option<(std::net::SocketAddr, Option<String>)>,
}

/// `--ui`, `--metrics`: `IP:PORT`, `[IPV6]:PORT` or a port on 127.0.0.1.
pub(crate) fn ui_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| {
        "expected IP:PORT (127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080) or a port".to_string()
    })
}

/// `--ui-token-file`, `--metrics-token-file`: the token on the file's first line
/// ([`ictus_ui::check_token`]), from a file only its owner may read.
pub(crate) fn token_file(path: &str) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{path}: {e}"))?;
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{path} may be read by others (mode {:o}): `chmod 600 {path}`",
            meta.mode() & 0o777
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    check_token(&token)
        .map(|()| token)
        .map_err(|e| format!("{path}: {e}"))
}

/// The token of the environment's `var`, checked ([`ictus_ui::check_token`]).
pub(crate) fn token_env(var: &str) -> Result<Option<String>, Failure> {
    match std::env::var(var) {
        Ok(t) if !t.is_empty() => check_token(&t)
            .map(|()| Some(t))
            .map_err(|e| Failure::usage(anyhow::anyhow!("{var}: {e}"))),
        _ => Ok(None),
    }
}

#[derive(Debug, Args)]
pub(crate) struct NodeArgs {
    /// The schedule, the same file as the main host's (its host table names this host).
    pub(crate) schedule: PathBuf,
    /// This host's name in the schedule's host table (not the first: that one is the
    /// main host, where `ictus run` coordinates).
    #[arg(long)]
    pub(crate) host: String,
    /// Override the schedule's tick, as the main host does (the two must agree).
    #[arg(long, value_parser = ictus_probe::cli::positive_duration)]
    pub(crate) tick: Option<Duration>,
    /// How long this host waits for its subsystems and then for the main host's start
    /// (hosts start in any order) before it gives up (exit code 1, nothing left behind).
    #[arg(long, default_value = "60s", value_parser = ictus_probe::cli::positive_duration)]
    pub(crate) ready_timeout: Duration,
    /// No live status line.
    #[arg(long)]
    pub(crate) quiet: bool,
    #[command(flatten)]
    pub(crate) common: RunCommon,
}

#[derive(Debug, Args)]
pub(crate) struct CtlArgs {
    /// `run`, `pause`, `off` or a mode of the schedule; `status` or `stop`.
    pub(crate) command: String,
    /// The run (its schedule's name); default: the only run active.
    #[arg(long, value_parser = run_name)]
    pub(crate) name: Option<String>,
}

/// `--name`: a name that can name a run (see [`ictus_exec::ctl::check_name`]).
pub(crate) fn run_name(s: &str) -> Result<String, String> {
    ictus_exec::ctl::check_name(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
}

/// Without the page no token is ever used (`--ui` and `--metrics` are refused, see
/// `built`), so none is checked.
#[cfg(not(feature = "page"))]
fn check_token(_token: &str) -> Result<(), String> {
    Ok(())
}
