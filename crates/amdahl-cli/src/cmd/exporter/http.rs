//! The exporter's HTTP server: hyper (HTTP/1.1) on a single-threaded tokio runtime, with a bound
//! on everything a client controls. hyper reads and parses the request and answers malformed or
//! oversized ones itself; this module sets its limits and hands well-formed requests to the
//! exporter's handler.
//!
//! Why not tiny_http (used before): it reads a header line until CRLF with no limit
//! (`ClientConnection::read_next_line`, tiny_http 0.12 src/client.rs; open since 2015 as
//! tiny-http/tiny-http#56), so one client sending a header without a newline grows the
//! exporter's memory for as long as it sends, and it has no read timeout. Here:
//!
//! * the request head must fit hyper's read buffer of [`MAX_HEAD`] bytes, and hold at most
//!   [`MAX_HEADERS`] fields: hyper answers 431 (RFC 6585 §5) otherwise; a request target longer
//!   than [`MAX_URL`] that fits is answered 414 here;
//! * the whole head must arrive within [`HEAD_TIMEOUT`] (hyper's `header_read_timeout`), however
//!   slowly it trickles; then the connection is closed;
//! * a connection lives at most [`CONNECTION_TIMEOUT`], so a client that never reads the answer
//!   frees its slot;
//! * at most [`MAX_CONNECTIONS`] connections are served at once; more get 503 at once;
//! * a refused client still reads its answer: see [`linger`].
//!
//! Connections are not kept alive: one request each (`Connection: close`), which Prometheus
//! handles like any server's, and which keeps the connection bound simple.

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// hyper's read buffer, which bounds the request head (request line and headers). /metrics
/// needs ~100 bytes; 16 KiB is twice Apache's `LimitRequestLine`/`LimitRequestFieldSize` (8190)
/// and nginx's 8 KiB header buffers (hyper's minimum is 8 KiB).
pub const MAX_HEAD: usize = 16 * 1024;
/// Longest request target answered (414 beyond).
pub const MAX_URL: usize = 2048;
/// Header fields accepted (Apache's `LimitRequestFields` is 100).
pub const MAX_HEADERS: usize = 64;
/// Connections served at once; more get 503 rather than a queue behind slow clients.
pub const MAX_CONNECTIONS: usize = 64;
/// Time allowed for the whole request head to arrive (a slowloris sending a byte a second is cut).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a connection may take in all, reading the request and writing the answer.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// After answering, how long and how much of what the client still sends is read and discarded
/// before the socket is closed (see [`linger`]). Apache lingers up to 30 s
/// (`MAX_SECS_TO_LINGER`, server/connection.c), nginx 30 s (`lingering_time`); a metrics
/// endpoint has no uploads to wait for, so 2 s and 4 MiB: enough for a client to finish sending
/// a refused 1 MiB head on any link faster than 20 Mbit/s, while a client that never stops
/// sending is cut off after 4 MiB.
pub const LINGER_TIME: Duration = Duration::from_secs(2);
pub const LINGER_BYTES: usize = 4 << 20;

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

/// The shared body as bytes hyper can send without copying it.
struct SharedBody(Arc<String>);

impl AsRef<[u8]> for SharedBody {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Accept connections on `listener` until accepting fails for good; each is served by hyper on
/// this thread's runtime and answered by `handler`. Returns the error that ended it (the caller
/// runs it on its own thread and decides when to stop).
pub fn serve(listener: TcpListener, handler: Handler) -> std::io::Error {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(r) => r,
        Err(e) => return e,
    };
    runtime.block_on(accept_loop(listener, handler))
}

async fn accept_loop(listener: TcpListener, handler: Handler) -> std::io::Error {
    if let Err(e) = listener.set_nonblocking(true) {
        return e;
    }
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of file descriptors, a connection reset before accept: transient.
            Err(e) if is_transient(&e) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(e) => return e,
        };
        let _ = stream.set_nodelay(true);
        let busy = open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS;
        let (h, n) = (Arc::clone(&handler), Arc::clone(&open));
        let mut stream = stream;
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let r = if busy {
                    Response::text(503, "busy: too many connections\n")
                } else {
                    answer(&req, &h)
                };
                std::future::ready(Ok::<_, std::convert::Infallible>(to_hyper(r)))
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .max_headers(MAX_HEADERS)
                .keep_alive(false)
                .serve_connection(TokioIo::new(&mut stream), service);
            // Errors here are the client's (a malformed head, hyper has answered it; a reset;
            // a timeout): nothing for the exporter to report.
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
            linger(stream).await;
            n.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Close a connection so that the client reads the answer already sent: the "lingering close" of
/// RFC 9112 §9.6. A refused request (431, 503) is answered before the client has finished
/// sending it; closing a socket with unread bytes in its receive buffer sends a TCP reset
/// (RFC 1122 §4.2.2.13), and a reset that arrives before the client reads throws the answer
/// away (the client sees "connection reset" instead of 431). So: end the write side (FIN after
/// the answer), then read and discard until the client closes, for at most [`LINGER_TIME`] and
/// [`LINGER_BYTES`], in a fixed buffer.
async fn linger(mut stream: tokio::net::TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 16 * 1024];
    let mut left = LINGER_BYTES;
    let drain = async {
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, drain).await;
}

fn answer(req: &hyper::Request<hyper::body::Incoming>, handler: &Handler) -> Response {
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    if target.len() > MAX_URL {
        return Response::text(414, "URI too long\n");
    }
    handler(&Request {
        method: req.method().as_str(),
        target,
    })
}

fn to_hyper(r: Response) -> hyper::Response<Full<Bytes>> {
    let mut out = hyper::Response::new(Full::new(Bytes::from_owner(SharedBody(r.body))));
    *out.status_mut() =
        hyper::StatusCode::from_u16(r.status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    for (k, v) in r.headers {
        if let Ok(v) = hyper::header::HeaderValue::from_str(&v) {
            out.headers_mut().insert(k, v);
        }
    }
    out
}

fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    ) || e.raw_os_error() == Some(24) // EMFILE
        || e.raw_os_error() == Some(23) // ENFILE
}
