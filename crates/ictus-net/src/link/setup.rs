//! A node's setup requests, sent to the main host's setup channel (`setup/kv/KEY`):
//! seed 003's client/server requests, as the node's subsystems make them.

use std::time::{Duration, Instant};

use ictus_exec::state::{SetupChannelError, SetupUpstream};
use zenoh::Wait;

use crate::Session;

/// A node's setup requests, sent to the main host's queryable (`setup/kv/KEY`).
pub(super) struct ZenohSetup {
    pub(super) session: Session,
    pub(super) prefix: String,
}

impl std::fmt::Debug for ZenohSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZenohSetup")
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// What the main host said to one setup request.
enum Answer {
    /// The value (a get) or the acknowledgement (a put).
    Value(Vec<u8>),
    /// It answered with an error: no such value yet, or a refused put.
    Refused(String),
    /// Nobody answered: the main host is not reachable (yet).
    Silent,
}

impl ZenohSetup {
    /// One request, waiting at most 500 ms for the answer.
    fn ask(&self, key: &str, value: Option<&[u8]>) -> Result<Answer, SetupChannelError> {
        let mut get = self
            .session
            .get(format!("{}{key}", self.prefix))
            .timeout(Duration::from_millis(500));
        if let Some(v) = value {
            get = get.payload(v.to_vec());
        }
        let replies = get
            .wait()
            .map_err(|e| SetupChannelError::Closed(e.to_string()))?;
        Ok(match replies.recv() {
            Ok(reply) => match reply.result() {
                Ok(sample) => Answer::Value(sample.payload().to_bytes().into_owned()),
                Err(e) => {
                    let why = String::from_utf8_lossy(&e.payload().to_bytes()).into_owned();
                    if why.starts_with("busy") {
                        // The main host answers so many at once: asked again.
                        Answer::Silent
                    } else {
                        Answer::Refused(why)
                    }
                }
            },
            Err(_) => Answer::Silent,
        })
    }
}

/// How long a put keeps asking a main host that does not answer (hosts start in any
/// order: the main one may not be up yet).
const SETUP_PUT_PATIENCE: Duration = Duration::from_secs(30);

impl SetupUpstream for ZenohSetup {
    fn put(&self, key: &str, value: &[u8]) -> Result<(), SetupChannelError> {
        let until = Instant::now() + SETUP_PUT_PATIENCE;
        loop {
            match self.ask(key, Some(value))? {
                Answer::Value(_) => return Ok(()),
                Answer::Refused(why) => {
                    return Err(SetupChannelError::Closed(format!(
                        "the main host refused '{key}': {why}"
                    )));
                }
                Answer::Silent if Instant::now() >= until => {
                    return Err(SetupChannelError::Closed(format!(
                        "the main host did not answer for {SETUP_PUT_PATIENCE:?}"
                    )));
                }
                Answer::Silent => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, SetupChannelError> {
        // Not published there yet, or the main host not reachable yet: the caller
        // asks again until its own wait ends.
        Ok(match self.ask(key, None)? {
            Answer::Value(v) => Some(v),
            Answer::Refused(_) | Answer::Silent => None,
        })
    }
}
