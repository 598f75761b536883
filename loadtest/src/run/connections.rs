//! How a run's watches are spread over connections and source addresses:
//! over HTTP/1.1 a client, so a TCP connection, per watch (an informer
//! process each); over HTTP/2 the watches of each source address
//! multiplexed, [`WATCHES_PER_CONNECTION`] to a connection, as client-go's
//! transport does.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use crate::tls::ClientTls;

/// The protocol of the watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// HTTP/1.1 only, one connection per watch.
    Http1,
    /// HTTP/2 when the server offers it by ALPN (`https`), the watches
    /// multiplexed; HTTP/1.1 otherwise, as client-go falls back.
    Http2,
}

/// Watches on one HTTP/2 connection at most. Client-go's transport fills
/// a connection up to the server's SETTINGS, then dials another; a reqwest
/// client holds one HTTP/2 connection to a server and queues the streams
/// beyond them, so watches are spread over clients, each within kubecache's
/// default bound (100 streams) with room to spare.
const WATCHES_PER_CONNECTION: usize = 50;

/// Source addresses at most: 127.0.0.1 up to 127.255.255.254.
pub(super) const MAX_ADDRESSES: usize = (1 << 24) - 2;

/// The source address and connection of the `i`th watch, over `addresses`
/// source addresses (at least 1): watches go to the addresses in turn; a
/// connection is the watch's own over HTTP/1.1, shared by up to
/// [`WATCHES_PER_CONNECTION`] of its address over HTTP/2.
fn connection_of(protocol: Protocol, addresses: usize, i: usize) -> (usize, usize) {
    let address = i % addresses;
    match protocol {
        Protocol::Http1 => (address, i),
        Protocol::Http2 => (address, i / addresses / WATCHES_PER_CONNECTION),
    }
}

/// The `k`th source address: 127.0.0.1 onward (all of 127.0.0.0/8 is
/// loopback on Linux).
fn source_address(k: usize) -> IpAddr {
    let first = u32::from(Ipv4Addr::new(127, 0, 0, 1));
    IpAddr::V4(Ipv4Addr::from(first + k as u32))
}

/// The client of each of `watches` watches, spread over `addresses` source
/// addresses (1: the system picks it, as for any other request).
pub(super) fn watch_clients(
    tls: &ClientTls,
    protocol: Protocol,
    addresses: usize,
    watches: usize,
) -> reqwest::Result<Vec<reqwest::Client>> {
    let addresses = addresses.clamp(1, MAX_ADDRESSES);
    let mut clients: HashMap<(usize, usize), reqwest::Client> = HashMap::new();
    let mut each = Vec::with_capacity(watches);
    for i in 0..watches {
        let (address, connection) = connection_of(protocol, addresses, i);
        let client = match clients.get(&(address, connection)) {
            Some(client) => client.clone(),
            None => {
                let builder = match protocol {
                    Protocol::Http1 => tls.http1(),
                    Protocol::Http2 => tls.http(),
                };
                let bound = (addresses > 1).then(|| source_address(address));
                let client = builder.local_address(bound).build()?;
                clients.insert((address, connection), client.clone());
                client
            }
        };
        each.push(client);
    }
    Ok(each)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn connections(
        protocol: Protocol,
        addresses: usize,
        watches: usize,
    ) -> HashSet<(usize, usize)> {
        (0..watches)
            .map(|i| connection_of(protocol, addresses, i))
            .collect()
    }

    #[test]
    fn over_http1_every_watch_has_a_connection_of_its_own() {
        assert_eq!(connections(Protocol::Http1, 250, 1_000).len(), 1_000);
        assert_eq!(connections(Protocol::Http1, 1, 10).len(), 10);
    }

    #[test]
    fn over_http2_the_watches_of_an_address_share_its_connections() {
        // 4 watches an address: one connection each.
        assert_eq!(connections(Protocol::Http2, 250, 1_000).len(), 250);
        // 40 an address: still one.
        assert_eq!(connections(Protocol::Http2, 250, 10_000).len(), 250);
        // 120 from one address: three of at most 50.
        assert_eq!(connections(Protocol::Http2, 1, 120).len(), 3);
    }

    #[test]
    fn source_addresses_count_up_from_127_0_0_1_across_octets() {
        assert_eq!(source_address(0), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(source_address(249), IpAddr::from([127, 0, 0, 250]));
        assert_eq!(source_address(255), IpAddr::from([127, 0, 1, 0]));
        assert_eq!(
            source_address(MAX_ADDRESSES - 1),
            IpAddr::from([127, 255, 255, 254])
        );
    }
}
