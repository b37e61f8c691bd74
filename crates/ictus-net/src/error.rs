//! Why a session could not be opened ([`NetError`]).

use thiserror::Error;

/// Why a session could not be opened.
#[derive(Debug, Error)]
pub enum NetError {
    /// An endpoint that is not `tcp/ADDRESS:PORT` or `udp/ADDRESS:PORT`.
    #[error(
        "endpoint '{text}': expected tcp/, udp/, tls/ or quic/ADDRESS:PORT (e.g. tcp/10.77.0.1:7447)"
    )]
    BadEndpoint {
        /// The endpoint as given.
        text: String,
    },
    /// Zenoh refused the configuration or could not open the session (a port in
    /// use, an address not on this host).
    #[error("zenoh: {0}")]
    Zenoh(String),
    /// The run's keys are missing or unreadable.
    #[error("keys: {0}")]
    Keys(String),
}
