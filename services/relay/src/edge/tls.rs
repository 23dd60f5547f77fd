//! Optional TLS for the relay's own listener (rustls with ring), for self-hosters without an
//! ingress in front. Behind an ingress or load balancer that terminates TLS, leave it off.
//!
//! Handshakes run in their own tasks and only finished streams reach the HTTP server, so a slow
//! or silent client cannot hold up the accept loop.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Finished handshakes waiting for the HTTP server to pick them up.
const READY_QUEUE: usize = 1024;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the certificate/key pair.
    #[error("certificate and key do not form a usable TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

fn pem_error(path: &Path, message: impl std::fmt::Display) -> TlsError {
    TlsError::Pem {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// Builds a server configuration from a PEM certificate chain and a PEM private key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_error(cert, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(cert, e))?;
    if chain.is_empty() {
        return Err(pem_error(cert, "no certificate found"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error(key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    // WebSocket upgrades are HTTP/1.1.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A listener that yields TLS streams whose handshake has completed.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `tcp`; handshakes run in background tasks, each holding one of
    /// `pending` (the connections not yet authenticated): past it a new connection is closed
    /// before its handshake.
    pub fn new(
        tcp: TcpListener,
        config: Arc<ServerConfig>,
        pending: Arc<tokio::sync::Semaphore>,
    ) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, ready) = mpsc::channel(READY_QUEUE);
        tokio::spawn(async move {
            loop {
                let (stream, addr) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Usually out of file descriptors: back off instead of spinning.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = pending.clone().try_acquire_owned() else {
                    tracing::debug!(%addr, "too many connections not yet authenticated: closed before the handshake");
                    continue;
                };
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::warn!(%error, "could not set TCP_NODELAY");
                }
                let (acceptor, done) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = done.send((tls, addr)).await;
                        }
                        Ok(Err(error)) => tracing::debug!(%error, %addr, "tls handshake failed"),
                        Err(_) => tracing::debug!(%addr, "tls handshake timed out"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(Self { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept task stops at its first accept after this listener is dropped, so
            // this branch is never reached while the listener is alive.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
