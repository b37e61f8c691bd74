//! What the server's tests share: clients from chosen loopback addresses.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};

/// A connection to `addr` from the loopback address `127.0.0.{2 + i / per}`: the
/// `i`th of many clients spread `per` to an address, as clients of several hosts
/// (the server counts [`ictus_ui::MAX_PER_ADDRESS`] per address).
pub(crate) fn connect_spread(addr: SocketAddr, i: usize, per: usize) -> TcpStream {
    let host = u8::try_from(2 + i / per).expect("at most 253 addresses");
    connect_from(addr, Ipv4Addr::new(127, 0, 0, host))
}

/// A connection to `addr` from `source` (an address of the loopback's 127/8).
pub(crate) fn connect_from(addr: SocketAddr, source: Ipv4Addr) -> TcpStream {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
    socket
        .bind(&SockAddr::from(SocketAddr::new(IpAddr::V4(source), 0)))
        .unwrap();
    socket.connect(&SockAddr::from(addr)).unwrap();
    TcpStream::from(socket)
}
