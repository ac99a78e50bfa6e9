//! One request: the side effect behind [`Fetch`], done by [`Http`] with
//! hyper's connection-level client over a new TCP connection each time.

use std::future::Future;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{Phase, RequestOutcome};

/// Bodies are read (so the whole response is timed) and thrown away; a
/// larger one is cut off there and still counts as answered.
const BODY_LIMIT: usize = 64 * 1024;

/// Sends one GET and says what came of it (the status is judged by the caller).
pub trait Fetch: Send + Sync + 'static {
    /// `Ok { status }` for any complete response; an error kind otherwise.
    fn get(
        &self,
        url: &http::Uri,
        timeout: Duration,
    ) -> impl Future<Output = (RequestOutcome, Duration)> + Send;
}

/// Any [`Fetch`] as one type: what a run is handed to reach its workload
/// (the real [`Http`], or a test's).
#[derive(Clone)]
pub struct AnyFetch(std::sync::Arc<dyn FetchBoxed>);

impl std::fmt::Debug for AnyFetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnyFetch")
    }
}

type Sent<'a> = std::pin::Pin<Box<dyn Future<Output = (RequestOutcome, Duration)> + Send + 'a>>;

trait FetchBoxed: Send + Sync + 'static {
    fn get_boxed<'a>(&'a self, url: &'a http::Uri, timeout: Duration) -> Sent<'a>;
}

impl<F: Fetch> FetchBoxed for F {
    fn get_boxed<'a>(&'a self, url: &'a http::Uri, timeout: Duration) -> Sent<'a> {
        Box::pin(self.get(url, timeout))
    }
}

impl AnyFetch {
    pub fn new<F: Fetch>(fetch: F) -> AnyFetch {
        AnyFetch(std::sync::Arc::new(fetch))
    }
}

impl Fetch for AnyFetch {
    async fn get(&self, url: &http::Uri, timeout: Duration) -> (RequestOutcome, Duration) {
        self.0.get_boxed(url, timeout).await
    }
}

/// The real client: a fresh connection per request (`Connection: close`), as
/// a new client would open, so a Service picks a backend for each request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Http;

impl Fetch for Http {
    async fn get(&self, url: &http::Uri, timeout: Duration) -> (RequestOutcome, Duration) {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let outcome = request(url, deadline).await;
        (outcome, started.elapsed())
    }
}

async fn request(url: &http::Uri, deadline: tokio::time::Instant) -> RequestOutcome {
    let Some(host) = url.host() else {
        return RequestOutcome::Error {
            message: format!("{url} names no host"),
        };
    };
    let port = url.port_u16().unwrap_or(80);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let connect = async {
        let addrs: Vec<_> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|_| RequestOutcome::Unreachable)?
            .collect();
        let mut last = RequestOutcome::Unreachable;
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(s) => return Ok(s),
                Err(e) => last = io_outcome(&e),
            }
        }
        Err(last)
    };
    let stream = match tokio::time::timeout_at(deadline, connect).await {
        Err(_) => {
            return RequestOutcome::Timeout {
                phase: Phase::Connect,
            };
        }
        Ok(Err(o)) => return o,
        Ok(Ok(s)) => s,
    };
    let exchange = async {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| hyper_outcome(&e))?;
        // The connection task ends with the exchange (or is dropped with it).
        let conn = tokio::spawn(conn);
        let path = url.path_and_query().map_or("/", |p| p.as_str());
        let authority = url.authority().map_or(host, |a| a.as_str());
        let req = http::Request::get(path)
            .header(http::header::HOST, authority)
            .header(http::header::CONNECTION, "close")
            .header(http::header::USER_AGENT, "nodefall-probe")
            .body(Empty::<Bytes>::new())
            .map_err(|e| RequestOutcome::Error {
                message: e.to_string(),
            })?;
        let response = sender
            .send_request(req)
            .await
            .map_err(|e| hyper_outcome(&e))?;
        let status = response.status().as_u16();
        // Read the body so a response cut short is a reset, not a success.
        let body = Limited::new(response.into_body(), BODY_LIMIT)
            .collect()
            .await;
        conn.abort();
        match body {
            Ok(_) => Ok(status),
            Err(e)
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some() =>
            {
                Ok(status)
            }
            Err(e) => Err(match e.downcast_ref::<hyper::Error>() {
                Some(h) => hyper_outcome(h),
                None => RequestOutcome::Reset,
            }),
        }
    };
    match tokio::time::timeout_at(deadline, exchange).await {
        Err(_) => RequestOutcome::Timeout {
            phase: Phase::Response,
        },
        Ok(Ok(status)) => RequestOutcome::Ok { status },
        Ok(Err(o)) => o,
    }
}

fn io_outcome(e: &std::io::Error) -> RequestOutcome {
    match e.kind() {
        ErrorKind::ConnectionRefused => RequestOutcome::Refused,
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
            RequestOutcome::Reset
        }
        ErrorKind::HostUnreachable
        | ErrorKind::NetworkUnreachable
        | ErrorKind::AddrNotAvailable => RequestOutcome::Unreachable,
        ErrorKind::TimedOut => RequestOutcome::Timeout {
            phase: Phase::Connect,
        },
        _ => RequestOutcome::Error {
            message: e.to_string(),
        },
    }
}

/// A hyper error: the connection closed or reset before a full response is
/// a reset; an I/O cause is classified as such.
fn hyper_outcome(e: &hyper::Error) -> RequestOutcome {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return io_outcome(io);
        }
        cause = c.source();
    }
    if e.is_incomplete_message() || e.is_closed() || e.is_canceled() {
        RequestOutcome::Reset
    } else {
        RequestOutcome::Error {
            message: e.to_string(),
        }
    }
}
