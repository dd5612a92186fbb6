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
//! * the whole head must arrive within [`HEAD_TIMEOUT`], however slowly it trickles (and a
//!   client that connects and sends nothing is cut as soon); then the connection is closed;
//! * a connection lives at most [`CONNECTION_TIMEOUT`], so a client that never reads the answer
//!   frees its slot;
//! * connections are bounded in all and per peer, and a well-behaved scraper always finds room:
//!   see [`Slots`];
//! * a refused client still reads its answer: see [`linger`].
//!
//! Connections are not kept alive: one request each (`Connection: close`), which Prometheus
//! handles like any server's, and which keeps the connection bound simple.

use std::collections::HashMap;
use std::net::{IpAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::AbortHandle;

/// hyper's read buffer, which bounds the request head (request line and headers). /metrics
/// needs ~100 bytes; 16 KiB is twice Apache's `LimitRequestLine`/`LimitRequestFieldSize` (8190)
/// and nginx's 8 KiB header buffers (hyper's minimum is 8 KiB).
pub const MAX_HEAD: usize = 16 * 1024;
/// Longest request target answered (414 beyond).
pub const MAX_URL: usize = 2048;
/// Header fields accepted (Apache's `LimitRequestFields` is 100).
pub const MAX_HEADERS: usize = 64;
/// Connections served at once. A newcomer beyond it takes the place of a connection that is
/// idle (lingering after its answer, silent since it connected, or still sending its head after
/// [`EVICT_AFTER`]), else it is refused: so 64 clients that connect and say nothing no longer lock every scraper out
/// (134 of 134 scrapes got 503 behind them).
pub const MAX_CONNECTIONS: usize = 64;
/// Connections one peer address may hold: on a cluster Prometheus scrapes from its own address,
/// so one other host can never take more than half the slots. Loopback is exempt: every local
/// client shares its address, where a per-address bound would only make them compete (50 fast
/// local scrapers), and an answer to loopback never waits on the network, so a local client
/// cannot hold a slot in the one phase that is never evicted for longer than it takes to write.
pub const MAX_PER_PEER: usize = MAX_CONNECTIONS / 2;
/// Refused connections answered 503 at once; more are closed without an answer. With
/// [`MAX_CONNECTIONS`] this bounds the sockets the server holds (an unbounded number of
/// half-served sockets once took every file descriptor, and the RAPL files became unreadable).
pub const MAX_REFUSING: usize = 16;
/// Time allowed for the whole request head to arrive (a slowloris sending a byte a second is
/// cut, and so is a client that sends nothing). Prometheus sends its ~200-byte head at once.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(3);
/// A connection that has sent part of its head may be evicted for a newcomer only after this
/// long, so the scraper whose head is on its way is not the one that goes.
pub const EVICT_AFTER: Duration = Duration::from_millis(250);
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

/// An answer, now or once the handler has it (the metrics text may first need rendering, which
/// runs off the server thread so other connections are served meanwhile).
pub type Reply = std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>;

pub type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

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

/// Where a connection is in its life, for choosing which one a newcomer may replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Accepted, its request head not complete yet.
    Head,
    /// Its request is being answered: never evicted.
    Answer,
    /// Answered, draining what the client still sends ([`linger`]).
    Linger,
}

#[derive(Debug)]
struct Slot {
    peer: IpAddr,
    since: Instant,
    phase: Phase,
    /// Whether the client has sent a byte ([`Heard`]).
    heard: Arc<AtomicBool>,
    abort: Option<AbortHandle>,
}

/// The connections held, with which may give way to a newcomer.
///
/// A newcomer from a peer at [`MAX_PER_PEER`] may replace one of that peer's idle connections,
/// one beyond [`MAX_CONNECTIONS`] anyone's. Idle, in the order they go: lingering (its answer
/// sent), silent (connected, not a byte sent: the oldest first), still sending its head after
/// [`EVICT_AFTER`] (the oldest first). Without an idle one the newcomer is refused. A silent
/// connection goes whatever its age: a newcomer is the youngest, and the accept loop lets every
/// connection read before the next accept, so a scraper's head (sent right after connecting) is
/// read long before 63 later newcomers could make it the oldest silent one; once a byte is
/// heard, it is safe for [`EVICT_AFTER`], and answered well within. Connections being answered
/// are never evicted, so a scraper is answered whatever idle sockets others hold; only clients that request and then do not read can fill the slots, each for at most
/// [`CONNECTION_TIMEOUT`], and one peer at most half of them.
#[derive(Debug, Default)]
struct Slots {
    next: u64,
    open: HashMap<u64, Slot>,
}

/// What to do with a new connection.
enum Admission {
    /// Serve it as this slot.
    Serve(u64),
    /// No room: refuse it.
    Refuse,
}

impl Slots {
    /// The idle slot a newcomer may take, among `peer`'s (or all, for None).
    fn victim(&self, peer: Option<IpAddr>, now: Instant) -> Option<u64> {
        self.open
            .iter()
            .filter(|(_, s)| peer.is_none_or(|p| s.peer == p))
            .filter_map(|(id, s)| match s.phase {
                Phase::Linger => Some((0, s.since, *id)),
                Phase::Head if !s.heard.load(Ordering::Relaxed) => Some((1, s.since, *id)),
                Phase::Head if now.duration_since(s.since) >= EVICT_AFTER => {
                    Some((2, s.since, *id))
                }
                _ => None,
            })
            .min()
            .map(|(_, _, id)| id)
    }

    fn admit(&mut self, peer: IpAddr, heard: &Arc<AtomicBool>, now: Instant) -> Admission {
        let of_peer = if peer.is_loopback() {
            0
        } else {
            self.open.values().filter(|s| s.peer == peer).count()
        };
        let scope = if of_peer >= MAX_PER_PEER {
            Some(Some(peer))
        } else if self.open.len() >= MAX_CONNECTIONS {
            Some(None)
        } else {
            None
        };
        if let Some(scope) = scope {
            let Some(v) = self.victim(scope, now) else {
                return Admission::Refuse;
            };
            self.evict(v);
        }
        self.next += 1;
        let slot = Slot {
            peer,
            since: now,
            phase: Phase::Head,
            heard: Arc::clone(heard),
            abort: None,
        };
        self.open.insert(self.next, slot);
        Admission::Serve(self.next)
    }

    /// Close a connection now: its slot is free at once, its socket when its task is dropped.
    fn evict(&mut self, id: u64) {
        if let Some(a) = self.open.remove(&id).and_then(|s| s.abort) {
            a.abort();
        }
    }

    fn set(&mut self, id: u64, phase: Phase) {
        if let Some(s) = self.open.get_mut(&id) {
            s.phase = phase;
            s.since = Instant::now();
        }
    }

    /// Close the connections whose head has taken longer than [`HEAD_TIMEOUT`].
    fn reap(&mut self, now: Instant) {
        let late: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, s)| s.phase == Phase::Head && now.duration_since(s.since) > HEAD_TIMEOUT)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            self.evict(id);
        }
    }
}

type SharedSlots = Arc<Mutex<Slots>>;

fn lock(slots: &SharedSlots) -> std::sync::MutexGuard<'_, Slots> {
    slots.lock().unwrap_or_else(|p| p.into_inner())
}

/// Frees a connection's slot however its task ends (done, timed out, aborted).
struct SlotGuard(SharedSlots, u64);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        lock(&self.0).open.remove(&self.1);
    }
}

async fn accept_loop(listener: TcpListener, handler: Handler) -> std::io::Error {
    if let Err(e) = listener.set_nonblocking(true) {
        return e;
    }
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let slots = SharedSlots::default();
    let refusing = Arc::new(AtomicUsize::new(0));
    tokio::spawn(reaper(Arc::clone(&slots)));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            // Out of file descriptors, a connection reset before accept: transient.
            Err(e) if is_transient(&e) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Err(e) => return e,
        };
        let _ = stream.set_nodelay(true);
        let heard = Arc::new(AtomicBool::new(false));
        let admission = lock(&slots).admit(peer.ip(), &heard, Instant::now());
        match admission {
            Admission::Serve(id) => {
                let conn = Conn {
                    slots: Arc::clone(&slots),
                    id,
                    heard,
                };
                let task = tokio::spawn(serve_connection(stream, Arc::clone(&handler), conn));
                if let Some(s) = lock(&slots).open.get_mut(&id) {
                    s.abort = Some(task.abort_handle());
                }
            }
            Admission::Refuse if refusing.fetch_add(1, Ordering::SeqCst) < MAX_REFUSING => {
                let n = Arc::clone(&refusing);
                tokio::spawn(async move {
                    refuse(stream).await;
                    n.fetch_sub(1, Ordering::SeqCst);
                });
            }
            Admission::Refuse => {
                refusing.fetch_sub(1, Ordering::SeqCst);
                drop(stream);
            }
        }
        // Let the connections accepted so far read their heads before the next accept: a
        // burst of accepts must not find a scraper "still sending" whose head already arrived.
        tokio::task::yield_now().await;
    }
}

/// Every 250 ms, close the connections whose head is late (hyper's `header_read_timeout` also
/// cuts a slow head, this one also a client that never sent a byte).
async fn reaper(slots: SharedSlots) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tick.tick().await;
        lock(&slots).reap(Instant::now());
    }
}

/// A connection's slot, and the flag its reads set.
struct Conn {
    slots: SharedSlots,
    id: u64,
    heard: Arc<AtomicBool>,
}

/// A stream that notes when the client has sent its first byte (for [`Slots::victim`]).
struct Heard<'a> {
    stream: &'a mut tokio::net::TcpStream,
    heard: Arc<AtomicBool>,
}

impl tokio::io::AsyncRead for Heard<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut *self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.heard.store(true, Ordering::Relaxed);
        }
        r
    }
}

impl tokio::io::AsyncWrite for Heard<'_> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut *self.stream).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.stream).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut *self.stream).poll_shutdown(cx)
    }
}

/// Serve one connection in its slot: hyper reads the head (its phase then `Answer`), the
/// handler answers, then [`linger`].
async fn serve_connection(mut stream: tokio::net::TcpStream, handler: Handler, conn: Conn) {
    let Conn { slots, id, heard } = conn;
    let _guard = SlotGuard(Arc::clone(&slots), id);
    let s = Arc::clone(&slots);
    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        lock(&s).set(id, Phase::Answer);
        let r = answer(&req, &handler);
        async move { Ok::<_, std::convert::Infallible>(to_hyper(r.await)) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .keep_alive(false)
        .serve_connection(
            TokioIo::new(Heard {
                stream: &mut stream,
                heard,
            }),
            service,
        );
    // Errors here are the client's (a malformed head, hyper has answered it; a reset; a
    // timeout): nothing for the exporter to report.
    let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
    lock(&slots).set(id, Phase::Linger);
    linger(stream).await;
}

/// Answer a connection there is no room for: 503 at once, without reading its request, then a
/// short [`linger`] so that the answer is not lost to a reset.
async fn refuse(mut stream: tokio::net::TcpStream) {
    let answer = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
                   Content-Length: 27\r\nRetry-After: 1\r\nConnection: close\r\n\r\n\
                   busy: too many connections\n";
    let write = tokio::time::timeout(Duration::from_millis(200), stream.write_all(answer));
    if matches!(write.await, Ok(Ok(()))) {
        let _ = tokio::time::timeout(Duration::from_millis(300), linger(stream)).await;
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

fn answer(req: &hyper::Request<hyper::body::Incoming>, handler: &Handler) -> Reply {
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    if target.len() > MAX_URL {
        return Box::pin(std::future::ready(Response::text(414, "URI too long\n")));
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
