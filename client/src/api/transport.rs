//! The client side of the local API: one request over the Unix socket, its answer read back,
//! blocking (hooks and the CLI) or async (the MCP server); [`typed`] reads an answer as its
//! request's typed reply.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::{ApiError, Request, Response};

/// Why a call to the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Nothing listens on the socket.
    #[error("the repowire daemon is not running ({0})")]
    NotRunning(String),
    /// The connection broke or timed out.
    #[error("talking to the daemon failed: {0}")]
    Io(#[from] std::io::Error),
    /// The daemon answered with an error.
    #[error("{0}")]
    Api(ApiError),
    /// The daemon's answer could not be read.
    #[error("unreadable answer from the daemon: {0}")]
    Protocol(String),
}

/// [`call`], with the answer read as the request's typed reply.
pub fn call_as<T: serde::de::DeserializeOwned>(
    socket: &Path,
    request: &Request,
    timeout: Duration,
) -> Result<T, CallError> {
    typed(call(socket, request, timeout)?)
}

/// A daemon's answer as a typed reply; one that does not fit is a protocol error (a daemon of
/// another version), never a default.
pub fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, CallError> {
    serde_json::from_value(v).map_err(|e| CallError::Protocol(format!("the answer's shape: {e}")))
}

/// Sends one request and reads its response (blocking; no async runtime needed, so hooks stay fast).
pub fn call(socket: &Path, request: &Request, timeout: Duration) -> Result<Value, CallError> {
    let mut stream = UnixStream::connect(socket)
        .map_err(|e| CallError::NotRunning(format!("{}: {e}", socket.display())))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut line = serde_json::to_vec(request).map_err(|e| CallError::Protocol(e.to_string()))?;
    line.push(b'\n');
    stream.write_all(&line)?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer)?;
    let response: Response =
        serde_json::from_str(&answer).map_err(|e| CallError::Protocol(e.to_string()))?;
    match (response.ok, response.result, response.error) {
        (true, Some(result), _) => Ok(result),
        (false, _, Some(error)) => Err(CallError::Api(error)),
        _ => Err(CallError::Protocol("neither result nor error".into())),
    }
}

/// Like [`call`], asynchronously; dropping the future closes the connection, which cancels the
/// request in the daemon (nothing it would have handed over is marked handed over).
pub async fn call_async(
    socket: &Path,
    request: &Request,
    timeout: Duration,
) -> Result<Value, CallError> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|e| CallError::NotRunning(format!("{}: {e}", socket.display())))?;
        let mut line =
            serde_json::to_vec(request).map_err(|e| CallError::Protocol(e.to_string()))?;
        line.push(b'\n');
        stream.write_all(&line).await?;
        let mut answer = String::new();
        tokio::io::BufReader::new(stream)
            .read_line(&mut answer)
            .await?;
        Ok::<String, CallError>(answer)
    };
    let answer = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| {
            CallError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the daemon did not answer in time",
            ))
        })??;
    let response: Response =
        serde_json::from_str(&answer).map_err(|e| CallError::Protocol(e.to_string()))?;
    match (response.ok, response.result, response.error) {
        (true, Some(result), _) => Ok(result),
        (false, _, Some(error)) => Err(CallError::Api(error)),
        _ => Err(CallError::Protocol("neither result nor error".into())),
    }
}
