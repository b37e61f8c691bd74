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
    /// Make a run's CA and a certificate and key per host (and per reader) in DIR:
    /// DIR/ca.pem, DIR/ca/ca.key (kept apart), DIR/hosts/H.pem and .key,
    /// DIR/readers/R.pem and .key; files 0600, folders 0700; never over existing keys.
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
            "host {}: {} and {}",
            h.name,
            h.cert.display(),
            h.key.display()
        );
    }
    for r in &made.readers {
        println!(
            "reader {}: {} and {} (may read, never write)",
            r.name,
            r.cert.display(),
            r.key.display()
        );
    }
    println!(
        "Copy to each host the CA's certificate, its own certificate and key, and the readers' \
         certificates (readers/*.pem: a host lets in only the readers it has; never their keys); \
         keep {} off the hosts.",
        made.ca_key.display()
    );
    Ok(())
}
