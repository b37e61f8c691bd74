//! `ictus keys new DIR --hosts h1,h2,h3 [--readers NAME,...]`: the run's CA and the
//! hosts' (and readers') certificates and keys, for TLS with mutual authentication
//! between the hosts of a run (`ictus_net::keys`).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use ictus_net::keys::{self, KeysError, KeysRequest};

use crate::Failure;

/// `ictus keys`.
#[derive(Debug, Args)]
pub(crate) struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Make a run's CA and a certificate and key per host (and per reader) in DIR,
    /// with a bundle per host and reader to copy to it: DIR/bundles/hosts/H (the
    /// CA's certificate, H's certificate and key, the readers' certificates) and
    /// DIR/bundles/readers/R (R's certificate and key, the CA's and the hosts'
    /// certificates); the whole of DIR (every key, the CA's in DIR/ca/) stays
    /// where it was made. Files 0600, folders 0700; never over existing keys.
    New(NewArgs),
    /// Make a host's (or reader's) key and certificate anew in DIR (made by `keys
    /// new`, with the CA's key): when it nears its expiry, or was stolen. Its files in
    /// DIR and in its bundle are replaced; copy the bundle to it again. Nothing of
    /// the other hosts changes.
    Renew(RenewArgs),
    /// Say when each certificate in DIR (a keys folder or a bundle) ends: the CA's,
    /// the hosts' and the readers'. Exits 1 when one has ended or ends within 14
    /// days (what `ictus run` and `ictus node` warn of), 0 otherwise.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The keys folder or bundle.
    dir: PathBuf,
}

#[derive(Debug, Args)]
struct RenewArgs {
    /// The keys folder `ictus keys new` made (with ca/ca.key).
    dir: PathBuf,
    /// The host to renew.
    #[arg(long, conflicts_with = "reader", required_unless_present = "reader")]
    host: Option<String>,
    /// The reader to renew.
    #[arg(long)]
    reader: Option<String>,
    /// Shut out its earlier certificate at once (stolen): the new one gets a name of
    /// its own, written to DIR/names and to every bundle's; copy that `names` file to
    /// every host (no host is re-keyed), and the renewed bundle to it.
    #[arg(long)]
    retire: bool,
    /// Days the new certificate is valid (1 to 3650; no later than the CA's end).
    #[arg(long, default_value_t = keys::DEFAULT_DAYS, value_name = "DAYS")]
    days: u32,
}

#[derive(Debug, Args)]
struct NewArgs {
    /// The directory to make (absent, or empty).
    dir: PathBuf,
    /// The hosts, by the names the schedule's [[host]] tables give them.
    #[arg(long, value_delimiter = ',', required = true)]
    hosts: Vec<String>,
    /// Readers: tools that may read the run and never write it (the Python client...).
    #[arg(long, value_delimiter = ',')]
    readers: Vec<String>,
    /// Days the hosts' and readers' certificates are valid (1 to 3650): short, as a
    /// stolen key is good until its certificate ends; `ictus keys renew` makes new
    /// ones, and `ictus run` and `ictus node` warn 14 days before.
    #[arg(long, default_value_t = keys::DEFAULT_DAYS, value_name = "DAYS")]
    days: u32,
    /// Days the CA's certificate is valid (at least --days, at most 3650): it signs
    /// the renewals, so it outlives them.
    #[arg(long, default_value_t = keys::DEFAULT_CA_DAYS, value_name = "DAYS")]
    ca_days: u32,
}

/// Runs `ictus keys`.
pub(crate) fn run(args: &KeysArgs) -> Result<(), Failure> {
    match &args.command {
        KeysCommand::New(a) => new(a),
        KeysCommand::Renew(a) => renew(a),
        KeysCommand::Check(a) => check(a),
    }
}

/// How long before its end a certificate is said to end soon.
pub(crate) const SOON_DAYS: u64 = 14;

/// When each certificate of a keys folder or bundle ends: the CA's, then the
/// hosts' and the readers', each named (`host h2`).
pub(crate) fn certificate_ends(
    dir: &std::path::Path,
) -> Result<Vec<(String, std::time::SystemTime)>, String> {
    let mut certs = vec![("the CA".to_string(), dir.join("ca.pem"))];
    for (folder, what) in [("hosts", "host"), ("readers", "reader")] {
        let mut found: Vec<_> = std::fs::read_dir(dir.join(folder))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let name = name.strip_suffix(".pem")?.to_string();
                Some((format!("{what} {name}"), e.path()))
            })
            .collect();
        found.sort();
        certs.extend(found);
    }
    certs
        .into_iter()
        .map(|(who, path)| Ok((who, keys::expires(&path)?)))
        .collect()
}

/// One certificate's state in words, and whether it is due (ended, or ends within
/// [`SOON_DAYS`]).
pub(crate) fn end_words(end: std::time::SystemTime) -> (String, bool) {
    let now = std::time::SystemTime::now();
    let soon = now + std::time::Duration::from_secs(SOON_DAYS * 86_400);
    let days = end.duration_since(now).map_or(0, |d| d.as_secs() / 86_400);
    if end <= now {
        (
            "ENDED: renew it (`ictus keys renew`; the CA: `ictus keys new`)".to_string(),
            true,
        )
    } else if end <= soon {
        (format!("ends in {days} day(s): renew it soon"), true)
    } else {
        (format!("{days} day(s) left"), false)
    }
}

fn check(a: &CheckArgs) -> Result<(), Failure> {
    let ends = certificate_ends(&a.dir).map_err(|e| Failure::usage(anyhow::anyhow!(e)))?;
    let mut due = 0;
    for (who, end) in &ends {
        let (state, is_due) = end_words(*end);
        due += usize::from(is_due);
        println!(
            "{who}: valid until {}, {state}",
            humantime::format_rfc3339_seconds(*end)
        );
    }
    if due > 0 {
        return Err(Failure::from(anyhow::anyhow!(
            "{due} certificate(s) end within {SOON_DAYS} days or have ended"
        )));
    }
    Ok(())
}

fn renew(a: &RenewArgs) -> Result<(), Failure> {
    let who = match (&a.host, &a.reader) {
        (Some(h), _) => keys::Holder::Host(h),
        (None, Some(r)) => keys::Holder::Reader(r),
        (None, None) => unreachable!("clap requires --host or --reader"),
    };
    let issued = keys::renew(&a.dir, who, a.days, a.retire).map_err(|e| match e {
        KeysError::Generate { .. } => Failure::from(anyhow::Error::new(e)),
        bad_input => Failure::usage(bad_input),
    })?;
    let end = keys::expires(&issued.cert).map_err(|e| Failure::from(anyhow::anyhow!(e)))?;
    println!(
        "{}: a new key and certificate, valid until {}; copy {} to it again",
        issued.name,
        humantime::format_rfc3339_seconds(end),
        issued.bundle.display()
    );
    if a.retire {
        println!(
            "its earlier certificate is retired for every host given the new {}: copy \
             that file (public) into every host's keys folder before the next run",
            a.dir.join(keys::NAMES_FILE).display()
        );
    }
    Ok(())
}

fn new(a: &NewArgs) -> Result<(), Failure> {
    let made = keys::new(&KeysRequest {
        dir: a.dir.clone(),
        hosts: a.hosts.clone(),
        readers: a.readers.clone(),
        validity: ictus_net::keys::Validity {
            days: a.days,
            ca_days: a.ca_days,
        },
    })
    .map_err(|e| match e {
        KeysError::Io { .. } | KeysError::Generate { .. } => Failure::from(anyhow::Error::new(e)),
        bad_input => Failure::usage(bad_input),
    })?;
    println!(
        "the run's CA: {} (its key apart: {})",
        made.ca_cert.display(),
        made.ca_key.display()
    );
    for h in &made.hosts {
        println!(
            "host {}: copy {} to it (its key, the CA's certificate, the readers' certificates)",
            h.name,
            h.bundle.display()
        );
    }
    for r in &made.readers {
        println!(
            "reader {}: copy {} to it (may read, never write)",
            r.name,
            r.bundle.display()
        );
    }
    println!(
        "Give each host its bundle as --keys (`ictus node FILE --host H --keys BUNDLE`). \
         Keep {} itself, with every private key and the CA's ({}), off the hosts: a \
         host given it is refused unless told --shared-keys.",
        a.dir.display(),
        made.ca_key.display()
    );
    Ok(())
}
