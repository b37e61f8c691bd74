//! What the server's tests share: requests, and clients from chosen loopback
//! addresses.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// One HTTP/1.1 request on a connection of its own, the status code and body of the
/// answer.
pub(crate) fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    request(TcpStream::connect(addr).unwrap(), method, path, headers)
}

/// One HTTP/1.1 request on `s` (closed after), the status code and body of the
/// answer; `Host` is the peer's address unless `headers` names one.
#[allow(dead_code, reason = "one test file sends its own connection's request")]
pub(crate) fn request(
    mut s: TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let host = headers
        .iter()
        .find(|(k, _)| *k == "Host")
        .map_or(s.peer_addr().unwrap().to_string(), |(_, v)| v.to_string());
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers.iter().filter(|(k, _)| *k != "Host") {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Content-Length: 0\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    // A refusal (503) may end in a reset: what came before it is the answer.
    let _ = s.read_to_string(&mut answer);
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// A connection to `addr` from the loopback address `127.0.0.{2 + i / per}`: the
/// `i`th of many clients spread `per` to an address, as clients of several hosts
/// (the server counts [`ictus_ui::MAX_PER_ADDRESS`] per address).
pub(crate) fn connect_spread(addr: SocketAddr, i: usize, per: usize) -> TcpStream {
    let host = u8::try_from(2 + i / per).expect("at most 253 addresses");
    connect_from(addr, Ipv4Addr::new(127, 0, 0, host))
}

/// A connection to `addr` from `source` (an address of the loopback's 127/8).
#[allow(dead_code, reason = "one test file chooses its clients' address")]
pub(crate) fn connect_from(addr: SocketAddr, source: Ipv4Addr) -> TcpStream {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
    socket
        .bind(&SockAddr::from(SocketAddr::new(IpAddr::V4(source), 0)))
        .unwrap();
    socket.connect(&SockAddr::from(addr)).unwrap();
    TcpStream::from(socket)
}
