//! Trusted links (issue 21): Zenoh's TLS transport with mutual authentication, and
//! Zenoh's access control, configured from the keys `ictus keys new` made.
//!
//! A run across hosts is authenticated and encrypted by default: every host listens
//! and connects on `quic/ADDRESS:PORT` (Zenoh's QUIC link: TLS 1.3 inside QUIC, over
//! UDP), shows the certificate the run's CA signed for it and accepts only peers that
//! show one from the same CA. A peer without one, or with one from another CA, never
//! completes the handshake: it cannot read, write or even see the run.
//!
//! Why QUIC and not Zenoh's TLS-over-TCP link, which takes the same certificates and
//! settings: with Zenoh 1.10.2 a TLS-over-TCP session between two hosts dropped once,
//! about half a second after it opened, as soon as cells flowed ("TX task failed:
//! handshake not complete", then the session closed and was made again): a run sees
//! that as a host leaving and loses its frames. It happened in most runs of the
//! three-host ring on loopback; the QUIC link showed no such drop.
//!
//! Who may do what is then said by each certificate's common name, in Zenoh's access
//! rules ([`access_rules`]), applied by every host to every message it receives
//! (default: deny):
//!
//! | from | may publish | may serve (queryable, reply) | may ask |
//! |---|---|---|---|
//! | the main host | `tick`, `view/tick`, its cells `cell/*/MAIN` and `view/cell/*/MAIN`, its hub operations `hub/MAIN/*` | `setup/**`, `layout`, `claims/MAIN` | `outcome/**`, `claims/**`, `layout` |
//! | node H | its cells `cell/*/H` and `view/cell/*/H`, its status `status/H` and beat `beat/H`, its hub operations `hub/H/*` | `outcome/H`, `layout`, `claims/H` | `setup/**`, `claims/**`, `layout` |
//! | reader R (CN `reader:R`) | nothing | nothing | `layout`, `claims/*` |
//!
//! and what each host sends on: to a host everything of the run, to a reader only
//! the view (`view/**`, [`crate::view`]) and the status (besides the declarations
//! and the replies to what it may ask): no reader makes a host's own `put` of a cell
//! or a tick longer, and the hub operations, sent without loss, never wait on a
//! reader's queue.
//!
//! (keys under `ictus/RUN/`; every host and reader may subscribe to the run's keys
//! and watch who is alive, and each host holds its own liveliness tokens only, `host/H`
//! and `hubs/H`.) A hub operation's key `hub/FROM/TO` names its sender, so no host
//! can forge another's requests or grants ([`crate::hubs`]). A
//! reader asks for the layout to decode cells and for the claims to know which hosts
//! write a cell, and so when it has heard all of it (docs/wire.md). A host
//! name is a DNS label, so it is one key chunk, and `cell/C/H` can name only host H's
//! publications of cell C. Which *elements* of a cell a host may write is finer than
//! the rules can say: the receiving coordinator checks that ([`crate::link`]).
//!
//! The certificates name hosts, not addresses: hosts are verified by the CA and known
//! by their certificate's name (the access rules), so a host's name is not checked
//! against the address it was reached on (Zenoh's `verify_name_on_connect` is off:
//! the schedule gives addresses, the certificates names).
//!
//! **Only the run's CA.** Zenoh's QUIC and TLS links load Mozilla's public roots
//! (`webpki_roots::TLS_SERVER_ROOTS`) into every connecting side's trust store and
//! then add the configured CA; its configuration cannot turn that off, so a host
//! connecting out would take a server whose certificate any public CA signed. The
//! workspace puts an empty list in their place (`[patch.crates-io]`,
//! vendor/webpki-roots), checked when this crate compiles: a build without that
//! patch fails here rather than trust the web's CAs. Such a server would be denied
//! everything by the access rules anyway (no subject has its name: a host's name is
//! a single DNS label, which no public CA certifies); the patch makes the TLS layer
//! itself refuse it.

// The public roots Zenoh's links load besides the run's CA: none, or no build.
const _: () = assert!(
    webpki_roots::TLS_SERVER_ROOTS.is_empty(),
    "Zenoh's links would trust the web's public CAs besides the run's: build with the \
     workspace's [patch.crates-io] webpki-roots = {{ path = \"vendor/webpki-roots\" }}"
);

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::NetError;
use crate::keys::READER_PREFIX;

/// How a run's links are secured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Security {
    /// TLS with mutual authentication and access rules, from a keys directory.
    Tls(Credentials),
    /// Plain TCP, no authentication (`--insecure`): anyone who can reach a port may
    /// read, write and stop the run.
    Insecure,
}

/// One host's or reader's credentials in a keys directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The keys directory.
    pub dir: PathBuf,
    /// The name its certificate carries (a host's name, or `reader:R`).
    pub common_name: String,
    /// The run's CA certificate.
    pub ca: PathBuf,
    /// Its certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

impl Credentials {
    /// Host `host`'s credentials in `dir`, checked to be there.
    pub fn of_host(dir: &Path, host: &str) -> Result<Credentials, NetError> {
        Credentials::at(dir, "hosts", host, host.to_string())
    }

    /// Reader `reader`'s credentials in `dir`, checked to be there.
    pub fn of_reader(dir: &Path, reader: &str) -> Result<Credentials, NetError> {
        Credentials::at(dir, "readers", reader, format!("{READER_PREFIX}{reader}"))
    }

    fn at(
        dir: &Path,
        folder: &str,
        name: &str,
        common_name: String,
    ) -> Result<Credentials, NetError> {
        let c = Credentials {
            dir: dir.to_path_buf(),
            common_name,
            ca: dir.join("ca.pem"),
            cert: dir.join(folder).join(format!("{name}.pem")),
            key: dir.join(folder).join(format!("{name}.key")),
        };
        for path in [&c.ca, &c.cert, &c.key] {
            if let Err(e) = std::fs::File::open(path) {
                return Err(NetError::Keys(format!(
                    "{}: {e} (make the run's keys with `ictus keys new KEYS --hosts ...`, \
                     naming '{name}', and copy to this host its bundle, \
                     KEYS/bundles/{folder}/{name})",
                    path.display(),
                )));
            }
        }
        Ok(c)
    }

    /// Sets Zenoh's TLS transport to these credentials, with mutual authentication.
    pub fn apply(&self, c: &mut zenoh::Config) -> Result<(), NetError> {
        let z = |e: zenoh::Error| NetError::Zenoh(e.to_string());
        let quoted = |p: &Path| Value::String(p.display().to_string()).to_string();
        let tls = "transport/link/tls/";
        c.insert_json5(&format!("{tls}root_ca_certificate"), &quoted(&self.ca))
            .map_err(z)?;
        for side in ["listen", "connect"] {
            c.insert_json5(&format!("{tls}{side}_certificate"), &quoted(&self.cert))
                .map_err(z)?;
            c.insert_json5(&format!("{tls}{side}_private_key"), &quoted(&self.key))
                .map_err(z)?;
        }
        c.insert_json5(&format!("{tls}enable_mtls"), "true")
            .map_err(z)?;
        c.insert_json5(&format!("{tls}verify_name_on_connect"), "false")
            .map_err(z)?;
        c.insert_json5(&format!("{tls}close_link_on_expiration"), "true")
            .map_err(z)?;
        Ok(())
    }
}

/// What keys folder `dir` holds that host `host` must not: the CA's key, another
/// host's key, a reader's key, in words (empty: only its own). A host given a folder
/// with any of them would, stolen, be more than itself; `ictus keys new` writes each
/// host a bundle without them (`DIR/bundles/hosts/H`).
pub fn foreign_keys(dir: &Path, host: &str) -> Vec<String> {
    let mut found = Vec::new();
    if dir.join("ca").join("ca.key").exists() {
        found.push("the CA's key (ca/ca.key)".to_string());
    }
    let keys_in = |folder: &str| names_in(&dir.join(folder), ".key");
    found.extend(
        keys_in("hosts")
            .into_iter()
            .filter(|h| h != host)
            .map(|h| format!("host {h}'s key")),
    );
    found.extend(
        keys_in("readers")
            .into_iter()
            .map(|r| format!("reader {r}'s key")),
    );
    if found.is_empty() && dir.join("bundles").exists() {
        found.push("the other hosts' bundles (bundles/)".to_string());
    }
    found
}

/// The readers a keys directory holds certificates for (their names, sorted).
pub fn readers_in(dir: &Path) -> Vec<String> {
    names_in(&dir.join("readers"), ".pem")
}

/// The names of the files in `folder` ending in `suffix`, without it, sorted.
fn names_in(folder: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(suffix).map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// Zenoh's access rules for run `run` of `hosts` (the first the main host) and
/// `readers`, as the table of the module says: default deny, per host what it may
/// publish, serve and ask, readers only to listen and ask for the layout. Every host
/// of a run applies the same rules.
pub fn access_rules(run: &str, hosts: &[String], readers: &[String]) -> Value {
    access_rules_named(run, hosts, readers, &std::collections::BTreeMap::new())
}

/// [`access_rules`], with the certificates' common names of `names` (holder to name,
/// from the keys folder's `names`: [`crate::keys::common_names`]) in place of the
/// first ones: a holder whose certificate was retired is known only by its new
/// certificate's name, so the old one, stolen, matches no subject and is denied
/// everything.
pub fn access_rules_named(
    run: &str,
    hosts: &[String],
    readers: &[String],
    names: &std::collections::BTreeMap<String, String>,
) -> Value {
    let k = |rest: &str| format!("ictus/{run}/{rest}");
    let mut rules = shared_rules(&k);
    let mut policies = group_policies(hosts.len(), readers.len());
    let mut subjects = Vec::new();
    for (h, name) in hosts.iter().enumerate() {
        let id = format!("host-{h}");
        let cn = names.get(name).unwrap_or(name);
        subjects.push(json!({"id": id, "cert_common_names": [cn]}));
        rules.extend(host_rules(&k, &id, name, h == 0));
        policies.push(json!({
            "id": format!("{id}-policy"),
            "rules": [
                format!("{id}-publish"),
                format!("{id}-serve"),
                format!("{id}-ask"),
                format!("{id}-alive"),
            ],
            "subjects": [id],
        }));
    }
    for (r, name) in readers.iter().enumerate() {
        subjects.push(json!({
            "id": format!("reader-{r}"),
            "cert_common_names": [names
                .get(&format!("{READER_PREFIX}{name}"))
                .cloned()
                .unwrap_or_else(|| format!("{READER_PREFIX}{name}"))],
        }));
    }
    json!({
        "enabled": true,
        "default_permission": "deny",
        "rules": rules,
        "subjects": subjects,
        "policies": policies,
    })
}

/// One allow rule of the access control: its id, the messages and flows it allows,
/// on which keys.
fn rule(id: String, messages: &[&str], flows: &[&str], keys: Vec<String>) -> Value {
    json!({
        "id": id,
        "messages": messages,
        "flows": flows,
        "permission": "allow",
        "key_exprs": keys,
    })
}

/// The rules every host or every reader shares, whatever its name (`k` makes a key
/// of the run).
fn shared_rules(k: &dyn Fn(&str) -> String) -> Vec<Value> {
    vec![
        // What every host and reader may: listen to the run and be told what there is.
        rule(
            "listen".into(),
            &[
                "declare_subscriber",
                "declare_liveliness_subscriber",
                "liveliness_query",
            ],
            &["ingress"],
            vec![k("**")],
        ),
        // What this host sends everyone: its declarations.
        rule(
            "send-declarations".into(),
            &[
                "declare_subscriber",
                "declare_queryable",
                "liveliness_token",
                "declare_liveliness_subscriber",
                "liveliness_query",
            ],
            &["egress"],
            vec![k("**")],
        ),
        // What it sends the other hosts besides: all the data of the run.
        rule(
            "send".into(),
            &["put", "query", "reply"],
            &["egress"],
            vec![k("**")],
        ),
        // What it sends a reader besides: of the data only what readers get (the view
        // of the cells and the tick, the nodes' status: crate::view). The hosts' own
        // cells and tick never go to a reader, so no reader makes a put of theirs
        // longer; nor do the hub operations, which are sent without loss and so may wait
        // on a full queue (docs/wire.md).
        rule(
            "send-reader-data".into(),
            &["put"],
            &["egress"],
            vec![k("view/**"), k("status/*")],
        ),
        rule(
            "send-reader-replies".into(),
            &["reply"],
            &["egress"],
            vec![k("layout"), k("claims/*"), k("host/*")],
        ),
        // What a cell holds (the layout) and who writes it (the claims): what a reader
        // needs to read a cell whole.
        rule(
            "ask-layout-claims".into(),
            &["query"],
            &["ingress"],
            vec![k("layout"), k("claims/*")],
        ),
    ]
}

/// The policies that give every host, and every reader, the shared rules.
fn group_policies(hosts: usize, readers: usize) -> Vec<Value> {
    let every_host: Vec<String> = (0..hosts).map(|h| format!("host-{h}")).collect();
    let mut policies = vec![json!({
        "id": "hosts",
        "rules": ["listen", "send-declarations", "send", "ask-layout-claims"],
        "subjects": every_host,
    })];
    if readers > 0 {
        let every_reader: Vec<String> = (0..readers).map(|r| format!("reader-{r}")).collect();
        policies.push(json!({
            "id": "readers",
            "rules": [
                "listen",
                "send-declarations",
                "send-reader-data",
                "send-reader-replies",
                "ask-layout-claims",
            ],
            "subjects": every_reader,
        }));
    }
    policies
}

/// The rules of one host (`id`, named `name`; `main` for the first): what it
/// publishes, serves, asks and keeps alive.
fn host_rules(k: &dyn Fn(&str) -> String, id: &str, name: &str, main: bool) -> Vec<Value> {
    // Its cells, and its hub operations (to any host, from itself only).
    let mut publish = vec![
        k(&format!("cell/*/{name}")),
        k(&format!("view/cell/*/{name}")),
        k(&format!("hub/{name}/*")),
    ];
    let (serve, ask) = if main {
        publish.push(k("tick"));
        publish.push(k("view/tick"));
        (
            vec![k("setup/**"), k("layout"), k(&format!("claims/{name}"))],
            vec![k("outcome/**"), k("claims/**")],
        )
    } else {
        publish.push(k(&format!("status/{name}")));
        publish.push(k(&format!("beat/{name}")));
        (
            vec![
                k(&format!("outcome/{name}")),
                k("layout"),
                k(&format!("claims/{name}")),
            ],
            vec![k("setup/**"), k("claims/**")],
        )
    };
    vec![
        rule(format!("{id}-publish"), &["put"], &["ingress"], publish),
        rule(
            format!("{id}-serve"),
            &["declare_queryable", "reply"],
            &["ingress"],
            serve,
        ),
        rule(format!("{id}-ask"), &["query"], &["ingress"], ask),
        rule(
            format!("{id}-alive"),
            &["liveliness_token", "reply"],
            &["ingress"],
            vec![k(&format!("host/{name}")), k(&format!("hubs/{name}"))],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_give_each_host_its_own_keys_and_readers_none_to_write() {
        let hosts = vec!["h1".to_string(), "h2".to_string()];
        let rules = access_rules("r", &hosts, &["py".to_string()]);
        assert_eq!(rules["default_permission"], "deny");
        let text = rules.to_string();
        assert!(text.contains("\"ictus/r/cell/*/h2\""), "{text}");
        assert!(text.contains("\"ictus/r/hub/h2/*\""), "{text}");
        assert!(text.contains("\"ictus/r/hubs/h2\""), "{text}");
        assert!(text.contains("\"ictus/r/status/h2\""), "{text}");
        assert!(text.contains("\"reader:py\""), "{text}");
        // Only the main host's policy publishes the tick.
        let publish_tick: Vec<&Value> = rules["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| {
                r["messages"].to_string().contains("\"put\"")
                    && r["flows"].to_string().contains("ingress")
                    && r["key_exprs"].to_string().contains("ictus/r/tick")
            })
            .collect();
        assert_eq!(publish_tick.len(), 1);
        assert_eq!(publish_tick[0]["id"], "host-0-publish");
        // No rule lets a reader's subject put anything.
        for p in rules["policies"].as_array().unwrap() {
            if p["subjects"].to_string().contains("reader-0") {
                for r in p["rules"].as_array().unwrap() {
                    let rule = rules["rules"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|x| x["id"] == *r)
                        .unwrap();
                    let ingress = rule["flows"].to_string().contains("ingress");
                    let puts = rule["messages"].to_string().contains("\"put\"")
                        || rule["messages"].to_string().contains("declare_queryable");
                    assert!(!(ingress && puts), "reader may {rule}");
                }
            }
        }
        // What goes out to a reader: the view and the status, never the hosts' own
        // cells and tick, nor the hub operations (which may wait on a full queue).
        let reader_rules: Vec<&Value> = rules["policies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["subjects"].to_string().contains("reader-0"))
            .flat_map(|p| p["rules"].as_array().unwrap())
            .map(|id| {
                rules["rules"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|x| x["id"] == *id)
                    .unwrap()
            })
            .collect();
        let sent_puts: Vec<String> = reader_rules
            .iter()
            .filter(|r| {
                r["flows"].to_string().contains("egress")
                    && r["messages"].to_string().contains("\"put\"")
            })
            .flat_map(|r| r["key_exprs"].as_array().unwrap())
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        assert_eq!(sent_puts, ["ictus/r/view/**", "ictus/r/status/*"]);
        // Zenoh reads them.
        let mut c = zenoh::Config::default();
        c.insert_json5("access_control", &text).unwrap();
    }

    #[test]
    fn a_retired_holder_is_known_only_by_its_name_in_force() {
        let hosts = vec!["h1".to_string(), "h2".to_string()];
        let names: std::collections::BTreeMap<String, String> = [
            ("h2".to_string(), "h2.2".to_string()),
            ("reader:py".to_string(), "reader:py.3".to_string()),
        ]
        .into();
        let rules = access_rules_named("r", &hosts, &["py".to_string()], &names);
        let cns: Vec<String> = rules["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["cert_common_names"][0].as_str().unwrap().to_string())
            .collect();
        assert_eq!(cns, ["h1", "h2.2", "reader:py.3"]);
        assert_eq!(crate::readers::reader_of(Some("reader:py.3")), Some("py"));
        // A names file that cannot be read whole stops the host.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("names"), "# ok\nh2 h2.2\nh3\n").unwrap();
        let err = crate::keys::common_names(dir.path()).unwrap_err();
        assert!(
            err.ends_with(
                "names:3:1: expected `HOLDER NAME` (written by `ictus keys renew --retire`)"
            ),
            "{err}"
        );
        std::fs::write(dir.path().join("names"), "h2 h2.2\n").unwrap();
        assert_eq!(crate::keys::common_names(dir.path()).unwrap()["h2"], "h2.2");
    }
}
