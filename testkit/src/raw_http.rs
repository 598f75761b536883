//! A raw, blocking HTTP/1.0 GET over TCP or TLS: a request written by hand
//! and the response read until the server closes the connection. For tests
//! of a server in another process that must see its answers as they are
//! (no retries, no redirects, no client of the crate under test).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// GET `path` (with its query) from `addr`, over TLS with `tls` if given
/// (server name: the address's IP), with `Accept: application/json` and
/// the bearer token `token` if given: the status code and the body
/// (de-chunked).
pub fn get(
    addr: SocketAddr,
    tls: Option<&Arc<rustls::ClientConfig>>,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, Vec<u8>)> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    match tls {
        None => exchange(stream, addr, path, token),
        Some(config) => {
            let name = rustls::pki_types::ServerName::from(addr.ip());
            let connection = rustls::ClientConnection::new(config.clone(), name)
                .map_err(std::io::Error::other)?;
            exchange(
                rustls::StreamOwned::new(connection, stream),
                addr,
                path,
                token,
            )
        }
    }
}

fn exchange(
    mut stream: impl Read + Write,
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, Vec<u8>)> {
    let authorization =
        token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n{authorization}\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| invalid("no end of headers"))?;
    let head = String::from_utf8_lossy(&response[..end]).into_owned();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| invalid("no status code"))?;
    let mut body = response[end + 4..].to_vec();
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        body = dechunk(&body).ok_or_else(|| invalid("bad chunked body"))?;
    }
    Ok((code, body))
}

/// A chunked body's data; `None` if it is not whole (no last chunk).
pub fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}
