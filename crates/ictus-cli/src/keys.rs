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
    /// DIR/bundles/readers/R; the whole of DIR (every key, the CA's in DIR/ca/) stays
    /// where it was made. Files 0600, folders 0700; never over existing keys.
    New(NewArgs),
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
}

/// Runs `ictus keys`.
pub(crate) fn run(args: &KeysArgs) -> Result<(), Failure> {
    match &args.command {
        KeysCommand::New(a) => new(a),
    }
}

fn new(a: &NewArgs) -> Result<(), Failure> {
    let made = keys::new(&KeysRequest {
        dir: a.dir.clone(),
        hosts: a.hosts.clone(),
        readers: a.readers.clone(),
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
