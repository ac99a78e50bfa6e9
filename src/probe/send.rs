//! One request: the side effect behind [`Fetch`], done by [`Http`] with
//! hyper's connection-level client over a new TCP connection each time.

use std::future::Future;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{Outcome, Phase};

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
    ) -> impl Future<Output = (Outcome, Duration)> + Send;
}

/// The real client: a fresh connection per request (`Connection: close`), as
/// a new client would open, so a Service picks a backend for each request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Http;

impl Fetch for Http {
    async fn get(&self, url: &http::Uri, timeout: Duration) -> (Outcome, Duration) {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let outcome = request(url, deadline).await;
        (outcome, started.elapsed())
    }
}

async fn request(url: &http::Uri, deadline: tokio::time::Instant) -> Outcome {
    let Some(host) = url.host() else {
        return Outcome::Error {
            message: format!("{url} names no host"),
        };
    };
    let port = url.port_u16().unwrap_or(80);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let connect = async {
        let addrs: Vec<_> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|_| Outcome::Unreachable)?
            .collect();
        let mut last = Outcome::Unreachable;
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
            return Outcome::Timeout {
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
            .map_err(|e| Outcome::Error {
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
                None => Outcome::Reset,
            }),
        }
    };
    match tokio::time::timeout_at(deadline, exchange).await {
        Err(_) => Outcome::Timeout {
            phase: Phase::Response,
        },
        Ok(Ok(status)) => Outcome::Ok { status },
        Ok(Err(o)) => o,
    }
}

fn io_outcome(e: &std::io::Error) -> Outcome {
    match e.kind() {
        ErrorKind::ConnectionRefused => Outcome::Refused,
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
            Outcome::Reset
        }
        ErrorKind::HostUnreachable
        | ErrorKind::NetworkUnreachable
        | ErrorKind::AddrNotAvailable => Outcome::Unreachable,
        ErrorKind::TimedOut => Outcome::Timeout {
            phase: Phase::Connect,
        },
        _ => Outcome::Error {
            message: e.to_string(),
        },
    }
}

/// A hyper error: the connection closed or reset before a full response is
/// a reset; an I/O cause is classified as such.
fn hyper_outcome(e: &hyper::Error) -> Outcome {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return io_outcome(io);
        }
        cause = c.source();
    }
    if e.is_incomplete_message() || e.is_closed() || e.is_canceled() {
        Outcome::Reset
    } else {
        Outcome::Error {
            message: e.to_string(),
        }
    }
}
