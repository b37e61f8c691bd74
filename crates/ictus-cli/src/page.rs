//! The live page and `/metrics` of `ictus run` (the `page` feature): started when
//! asked, fed each status, told the end.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;

use ictus_exec::role::Role;
use ictus_exec::run::LiveStatus;
use ictus_exec::schedule::Schedule;
use ictus_ui::Ui;

use crate::Failure;
use crate::run_args::PageAsk;

/// The servers a run started: its page (`--ui`) and its `/metrics` alone
/// (`--metrics`), each when asked.
pub(crate) struct Pages {
    page: Option<Arc<Ui>>,
    metrics: Option<Arc<Ui>>,
}

impl Pages {
    /// Starts what `ask` asks for `schedule`'s run on host `here`, and says where.
    pub(crate) fn start(schedule: &Schedule, here: usize, ask: &PageAsk) -> Result<Pages, Failure> {
        Ok(Pages {
            page: live_page(schedule, here, ask, true)?,
            metrics: live_page(schedule, here, ask, false)?,
        })
    }

    /// What `ask` asks that this build cannot do, before anything starts: nothing,
    /// as it has the page (`built` refuses it in a build without).
    pub(crate) fn check(_ask: &PageAsk) -> Result<(), Failure> {
        Ok(())
    }

    /// Whether any server runs.
    pub(crate) fn any(&self) -> bool {
        self.page.is_some() || self.metrics.is_some()
    }

    /// What hands each status to every server.
    pub(crate) fn publisher(&self) -> impl FnMut(&LiveStatus) + Send + 'static {
        let servers: Vec<Arc<Ui>> = self.page.iter().chain(&self.metrics).cloned().collect();
        move |s: &LiveStatus| {
            for server in &servers {
                server.publish(s);
            }
        }
    }

    /// Tells the page the run ended, and why.
    pub(crate) fn end(&self, reason: &str) {
        if let Some(p) = &self.page {
            p.end(reason);
        }
    }
}

/// Starts the live page of `schedule`'s run (`page`, from `--ui`) or its `/metrics`
/// alone (from `--metrics`), when asked, and says where it is.
fn live_page(
    schedule: &Schedule,
    here: usize,
    ask: &PageAsk,
    page: bool,
) -> Result<Option<Arc<Ui>>, Failure> {
    let asked = if page { &ask.ui } else { &ask.metrics };
    let Some((addr, token)) = asked else {
        return Ok(None);
    };
    let token = match token {
        Some(t) => Some(t.clone()),
        None if !addr.ip().is_loopback() => {
            Some(ictus_ui::new_token().map_err(|e| anyhow::anyhow!(e))?)
        }
        None => None,
    };
    let control = ictus_exec::ctl::check_socket(&ictus_exec::ctl::run_dir(), &schedule.name)
        .map_err(Failure::usage)?;
    let (read_token, open_loopback) = if page {
        ask.ui_read.clone()
    } else {
        (None, false)
    };
    let ui = Ui::start(ictus_ui::UiOptions {
        addr: *addr,
        control,
        token,
        read_token,
        open_loopback,
        cpus: Some(Role::of_host(here).cpus_off_rt(schedule)).filter(|c| !c.is_empty()),
        page,
    })
    .map_err(|e| match e {
        e @ (ictus_ui::UiError::NoToken { .. } | ictus_ui::UiError::BadToken) => Failure::usage(e),
        e => anyhow::Error::new(e).into(),
    })?;
    let mut note = if page {
        format!("live page: {}", ui.url())
    } else {
        format!("metrics: {}", ui.metrics_url())
    };
    if addr.ip().is_unspecified() {
        let _ = write!(
            note,
            " (on every address of this machine; the token is required)"
        );
    }
    let _ = writeln!(std::io::stderr(), "{note}");
    if let Some(read) = ui.read_url().filter(|_| page) {
        let _ = writeln!(
            std::io::stderr(),
            "read-only (the page and /metrics, no command): {read}"
        );
    }
    Ok(Some(Arc::new(ui)))
}
