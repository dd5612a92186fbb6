//! The exporter's HTTP/1.1 server: std's `TcpListener`, hyper's request parser (`httparse`), and a
//! bound on everything a client controls. One request per connection (`Connection: close`, which
//! Prometheus handles like any server's), each connection on a thread of its own.
//!
//! Why not tiny_http (used before): it reads a header line until CRLF with no limit
//! (`ClientConnection::read_next_line`, tiny_http 0.12 src/client.rs; open since 2015 as
//! tiny-http/tiny-http#56), so one client sending a header without a newline grows the
//! exporter's memory for as long as it sends, and it has no read timeout, so each silent client
//! holds a thread forever. Here:
//!
//! * the request head (request line and headers) must fit in [`MAX_HEAD`] bytes: a longer request
//!   line is answered 414, longer headers 431 (RFC 6585 §5), more than [`MAX_HEADERS`] headers 431;
//! * the whole head must arrive within [`HEAD_TIMEOUT`] (408 otherwise), however slowly it trickles;
//! * at most [`MAX_CONNECTIONS`] connections are served at once; more get 503 at once;
//! * writes time out after [`WRITE_TIMEOUT`], so a client that never reads frees its thread.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Request line plus headers. /metrics needs ~100 bytes; 16 KiB is twice Apache's
/// `LimitRequestLine`/`LimitRequestFieldSize` (8190) and nginx's 8 KiB header buffers.
pub const MAX_HEAD: usize = 16 * 1024;
/// Longest request target answered (414 beyond).
pub const MAX_URL: usize = 2048;
/// Header fields accepted (Apache's `LimitRequestFields` is 100).
pub const MAX_HEADERS: usize = 64;
/// Connections served at once; more get 503 rather than a queue behind slow clients.
pub const MAX_CONNECTIONS: usize = 64;
/// Time allowed for the whole request head to arrive (a slowloris sending a byte a second is cut).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed for each write of the answer to make progress.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handler sees of a request.
pub struct Request<'a> {
    pub method: &'a str,
    /// The request target as sent (path and query).
    pub target: &'a str,
}

/// An answer: status, extra headers, body. The body is shared, not copied: 20 concurrent scrapes
/// of a 300 kB text would otherwise hold 6 MB of copies.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Arc<String>,
}

impl Response {
    pub fn text(status: u16, body: &str) -> Self {
        Response {
            status,
            headers: vec![("Content-Type", "text/plain; charset=utf-8".into())],
            body: Arc::new(body.to_string()),
        }
    }
}

pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Accept connections on `listener` for ever, each answered on its own thread by `handler`.
/// Returns only if accepting fails for good (the caller runs it on a thread of its own and
/// decides when to stop).
pub fn serve(listener: TcpListener, handler: Handler) -> std::io::Error {
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            // Out of file descriptors, a connection reset before accept: transient.
            Err(e) if is_transient(&e) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) => return e,
        };
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = write_response(
                &stream,
                &Response::text(503, "busy: too many connections\n"),
                true,
            );
            continue;
        }
        let (h, n) = (Arc::clone(&handler), Arc::clone(&open));
        let spawned = std::thread::Builder::new()
            .name("amdahl-http".into())
            .spawn(move || {
                connection(stream, &h);
                n.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    ) || e.raw_os_error() == Some(24) // EMFILE
        || e.raw_os_error() == Some(23) // ENFILE
}

/// Why a request head was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// The connection closed (or failed) before a whole head arrived: nothing to answer.
    Closed,
    Status(u16),
}

/// Read one request head (up to and including the blank line) within the bounds above.
pub fn read_head(stream: &mut impl ReadTimeout) -> Result<Vec<u8>, HeadError> {
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::Status(408));
        }
        stream.set_timeout(left);
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::Status(408))
            }
            Err(_) => return Err(HeadError::Closed),
        };
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
        if let Some(end) = find(head.get(from..).unwrap_or(&[]), b"\r\n\r\n") {
            head.truncate(from + end + 4);
            if head.len() > MAX_HEAD {
                return Err(HeadError::Status(too_long(&head)));
            }
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err(HeadError::Status(too_long(&head)));
        }
    }
}

/// 414 when the request line alone is over the bound, else 431.
fn too_long(head: &[u8]) -> u16 {
    match find(head, b"\r\n") {
        Some(i) if i <= MAX_HEAD => 431,
        _ => 414,
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A stream whose reads can be given a timeout (a `TcpStream`; a fake in tests).
pub trait ReadTimeout: Read {
    fn set_timeout(&mut self, t: Duration);
}

impl ReadTimeout for TcpStream {
    fn set_timeout(&mut self, t: Duration) {
        let _ = self.set_read_timeout(Some(t));
    }
}

/// Parse a complete head: the method and target, or the status to refuse it with.
pub fn parse_head(head: &[u8]) -> Result<(String, String), u16> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(400),
        Err(httparse::Error::TooManyHeaders) => return Err(431),
        Err(_) => return Err(400),
    }
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return Err(400);
    };
    if target.len() > MAX_URL {
        return Err(414);
    }
    Ok((method.to_string(), target.to_string()))
}

fn connection(mut stream: TcpStream, handler: &Handler) {
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let resp = match read_head(&mut stream) {
        Err(HeadError::Closed) => return,
        Err(HeadError::Status(s)) => Response::text(s, &format!("{}\n", reason(s))),
        Ok(head) => match parse_head(&head) {
            Err(s) => Response::text(s, &format!("{}\n", reason(s))),
            Ok((method, target)) => {
                let is_head = method == "HEAD";
                let r = handler(&Request {
                    method: &method,
                    target: &target,
                });
                let _ = write_response(&stream, &r, !is_head);
                return finish(stream);
            }
        },
    };
    let _ = write_response(&stream, &resp, true);
    finish(stream)
}

/// Close after the answer. Unread input (the rest of an oversized request) would make the kernel
/// reset the connection, and the client could lose the answer; so read and drop what is still
/// coming, for at most a second and 4 MiB, before closing (nginx's "lingering close").
fn finish(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let end = Instant::now() + Duration::from_secs(1);
    let mut sink = [0u8; 16 * 1024];
    let mut drained = 0usize;
    while Instant::now() < end && drained < 4 << 20 {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

fn write_response(mut w: &TcpStream, r: &Response, body: bool) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        r.status,
        reason(r.status),
        r.body.len()
    );
    for (k, v) in &r.headers {
        head.push_str(k);
        head.push_str(": ");
        head.push_str(v);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())?;
    if body {
        w.write_all(r.body.as_bytes())?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes handed out `step` at a time, then EOF or a timeout.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
        then_timeout: bool,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let rest = self.data.get(self.at..).unwrap_or(&[]);
            if rest.is_empty() {
                return if self.then_timeout {
                    Err(std::io::ErrorKind::WouldBlock.into())
                } else {
                    Ok(0)
                };
            }
            let n = rest.len().min(self.step).min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.at += n;
            Ok(n)
        }
    }

    impl ReadTimeout for Trickle {
        fn set_timeout(&mut self, _: Duration) {}
    }

    fn trickle(data: &[u8], step: usize, then_timeout: bool) -> Trickle {
        Trickle {
            data: data.to_vec(),
            at: 0,
            step,
            then_timeout,
        }
    }

    #[test]
    fn head_read_byte_by_byte_stops_at_the_blank_line() {
        let raw = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE AFTER";
        let head = read_head(&mut trickle(raw, 1, false)).unwrap();
        assert_eq!(head, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(
            parse_head(&head),
            Ok(("GET".to_string(), "/metrics".to_string()))
        );
    }

    #[test]
    fn oversized_heads_are_refused_with_the_right_status_without_reading_them_whole() {
        // A 1 MiB header line: 431 after reading at most MAX_HEAD + one chunk.
        let mut raw = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
        raw.extend(std::iter::repeat_n(b'b', 1 << 20));
        let mut t = trickle(&raw, 4096, false);
        assert_eq!(read_head(&mut t), Err(HeadError::Status(431)));
        assert!(t.at <= MAX_HEAD + 4096, "read {} bytes", t.at);
        // A 1 MiB request target: 414.
        let mut raw = b"GET /metrics?".to_vec();
        raw.extend(std::iter::repeat_n(b'a', 1 << 20));
        assert_eq!(
            read_head(&mut trickle(&raw, 4096, false)),
            Err(HeadError::Status(414))
        );
        // A target over MAX_URL but inside MAX_HEAD: 414 from the parser's result.
        let raw = format!("GET /?{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_URL));
        let head = read_head(&mut trickle(raw.as_bytes(), 4096, false)).unwrap();
        assert_eq!(parse_head(&head), Err(414));
        // Too many header fields: 431.
        let raw = format!(
            "GET / HTTP/1.1\r\n{}\r\n",
            "A: b\r\n".repeat(MAX_HEADERS + 1)
        );
        let head = read_head(&mut trickle(raw.as_bytes(), 4096, false)).unwrap();
        assert_eq!(parse_head(&head), Err(431));
    }

    #[test]
    fn stalls_time_out_and_garbage_is_a_bad_request() {
        assert_eq!(
            read_head(&mut trickle(b"GET /metr", 100, true)),
            Err(HeadError::Status(408))
        );
        assert_eq!(
            read_head(&mut trickle(b"GET /metr", 100, false)),
            Err(HeadError::Closed)
        );
        let head = read_head(&mut trickle(b"\x00\x01garbage\r\n\r\n", 100, false)).unwrap();
        assert_eq!(parse_head(&head), Err(400));
        let head = read_head(&mut trickle(b"GET / HTTP/2.0\r\n\r\n", 100, false)).unwrap();
        assert_eq!(parse_head(&head), Err(400));
    }
}
