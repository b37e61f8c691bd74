//! What this build of `ictus` has: the cargo features `hosts` (runs across hosts),
//! `page` (the live page and `/metrics`) and `record` (recording and replay), all
//! three in the default build (docs/install.md says what each costs to build). For
//! each one left out, what needs it stands here in its place: the same commands and
//! flags, refused as bad input (exit 2) with the build that has them, nothing run.

#![cfg_attr(
    all(feature = "hosts", feature = "page", feature = "record"),
    allow(
        dead_code,
        reason = "the default build has every feature: nothing here is used"
    )
)]

use crate::Failure;

/// Why `asked` cannot be done by this build, and the build that can.
pub(crate) fn missing(feature: &str, asked: &str) -> String {
    format!(
        "{asked}: this ictus was built without its `{feature}` feature; build it with \
         `cargo build --release --features {feature}` (the default build has it)"
    )
}

/// [`missing`], as bad input.
pub(crate) fn without(feature: &str, asked: &str) -> Failure {
    Failure::usage(anyhow::anyhow!(missing(feature, asked)))
}

/// What `ictus run` and `ictus node` need of the hosts, without them: a schedule
/// with a host table, or the flags of trust, are refused.
#[cfg(not(feature = "hosts"))]
pub(crate) mod hosts {
    use ictus_exec::link::Link;
    use ictus_exec::schedule::Schedule;
    use ictus_probe::session::Session;

    use crate::Failure;
    use crate::run_args::TrustArgs;

    /// No security: this build makes no link.
    #[derive(Debug, PartialEq)]
    pub(crate) enum Security {}

    /// Refuses a schedule across hosts and the flags of trust.
    pub(crate) fn security_for(
        schedule: &Schedule,
        _here: usize,
        trust: &TrustArgs,
    ) -> Result<Option<Security>, Failure> {
        if !schedule.hosts.is_empty() {
            return Err(crate::built::without(
                "hosts",
                &format!("{} (its [[host]] table)", schedule.path.display()),
            ));
        }
        if trust.keys.is_some() || trust.shared_keys || trust.insecure {
            return Err(crate::built::without(
                "hosts",
                "--keys, --shared-keys and --insecure",
            ));
        }
        Ok(None)
    }

    /// No other host to join.
    pub(crate) fn join_hosts(
        _schedule: &mut Schedule,
        _here: usize,
        _security: Option<&Security>,
        _session: &mut Session,
    ) -> Result<Option<Box<dyn Link>>, Failure> {
        Ok(None)
    }
}

/// `ictus keys`, without the hosts: whatever it is given, refused.
#[cfg(not(feature = "hosts"))]
pub(crate) mod keys {
    use crate::Failure;

    /// `ictus keys`: its words, taken as they come.
    #[derive(Debug, clap::Args)]
    pub(crate) struct KeysArgs {
        /// What `ictus keys` takes in a build with the `hosts` feature.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<std::ffi::OsString>,
    }

    /// Refused.
    pub(crate) fn run(_args: &KeysArgs) -> Result<(), Failure> {
        Err(crate::built::without("hosts", "ictus keys"))
    }
}

/// `ictus replay` and `--record`, without recording: refused.
#[cfg(not(feature = "record"))]
pub(crate) mod replay {
    use crate::Failure;

    /// `ictus replay`: its words, taken as they come.
    #[derive(Debug, clap::Args)]
    pub(crate) struct ReplayArgs {
        /// What `ictus replay` takes in a build with the `record` feature.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<std::ffi::OsString>,
    }

    /// Refused.
    pub(crate) fn run(_args: &ReplayArgs) -> Result<(), Failure> {
        Err(crate::built::without("record", "ictus replay"))
    }

    /// No sink without `--record`; with it, refused.
    pub(crate) fn record_sink(
        path: Option<&std::path::Path>,
    ) -> Result<Vec<Box<dyn ictus_exec::tap::Sink>>, Failure> {
        match path {
            None => Ok(Vec::new()),
            Some(_) => Err(crate::built::without("record", "--record")),
        }
    }
}

/// The live page and `/metrics`, without the page: asked, refused.
#[cfg(not(feature = "page"))]
pub(crate) mod page {
    use ictus_exec::run::LiveStatus;
    use ictus_exec::schedule::Schedule;

    use crate::Failure;
    use crate::run_args::PageAsk;

    /// No server.
    pub(crate) struct Pages;

    impl Pages {
        /// Refuses `--ui` and `--metrics`, before anything starts.
        pub(crate) fn check(ask: &PageAsk) -> Result<(), Failure> {
            if ask.ui.is_some() {
                return Err(crate::built::without("page", "--ui"));
            }
            if ask.metrics.is_some() {
                return Err(crate::built::without("page", "--metrics"));
            }
            Ok(())
        }

        /// Refuses `--ui` and `--metrics`.
        pub(crate) fn start(
            _schedule: &Schedule,
            _here: usize,
            ask: &PageAsk,
        ) -> Result<Pages, Failure> {
            Pages::check(ask).map(|()| Pages)
        }

        /// None runs.
        pub(crate) fn any(&self) -> bool {
            false
        }

        /// Hands each status to no one.
        pub(crate) fn publisher(&self) -> impl FnMut(&LiveStatus) + Send + 'static {
            |_: &LiveStatus| {}
        }

        /// No page to tell.
        pub(crate) fn end(&self, _reason: &str) {}
    }
}
