//! The relay's own TLS listener: a client that trusts the certificate gets a working `wss://`
//! session; one that does not, or that speaks plain `ws://` to the TLS port, gets nothing.

use crate::common;

use std::sync::Arc;

use common::{Db, TestRelay};
use futures::{SinkExt, StreamExt};
use repowire_protocol::{Body, Frame, Hello, decode, encode};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{Connector, connect_async_tls_with_config};

fn client_config(trusted: Option<&rcgen::Certificate>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(cert) = trusted {
        roots.add(cert.der().clone()).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

#[tokio::test]
async fn the_relay_serves_wss_with_a_configured_certificate() {
    let dir = tempfile::tempdir().expect("tmp");
    let issued = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, issued.cert.pem()).expect("write");
    std::fs::write(&key_path, issued.signing_key.serialize_pem()).expect("write");
    let tls = repowire_relay::edge::tls::server_config(&cert_path, &key_path).expect("tls config");

    let db = Db::sqlite();
    let relay = TestRelay::start_tls(&db, tls).await;
    let (tenant, key) = relay.tenant("acme").await;
    let key_id = relay.key_id(&key).await;
    let (token, _) = relay
        .state
        .tokens
        .issue(&key_id, &tenant, repowire_relay::ids::now_ms());
    let request = || {
        let mut r = relay.ws.as_str().into_client_request().expect("request");
        r.headers_mut().insert(
            "authorization",
            format!("Bearer {token}").parse().expect("header"),
        );
        r
    };

    let trusted = Some(Connector::Rustls(client_config(Some(&issued.cert))));
    let (mut ws, _) = connect_async_tls_with_config(request(), None, true, trusted)
        .await
        .expect("wss handshake");
    let hello = Frame::new(Body::Hello(Hello {
        client: "tls-test".into(),
    }));
    ws.send(Message::Text(encode(&hello).into()))
        .await
        .expect("send");
    let reply = ws.next().await.expect("frame").expect("read");
    let Message::Text(text) = reply else {
        panic!("text frame expected")
    };
    assert!(
        matches!(decode(text.as_str()).expect("frame").body, Body::Welcome(w) if w.tenant_id == tenant)
    );

    let untrusted = Some(Connector::Rustls(client_config(None)));
    assert!(
        connect_async_tls_with_config(request(), None, true, untrusted)
            .await
            .is_err(),
        "an unknown certificate must fail"
    );
    let plain = relay.ws.replace("wss://", "ws://");
    assert!(
        tokio_tungstenite::connect_async(plain).await.is_err(),
        "plain ws to the TLS port must fail"
    );
    relay.stop().await;
}

#[test]
fn unreadable_or_mismatched_pem_files_are_refused_with_their_path() {
    let dir = tempfile::tempdir().expect("tmp");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").expect("write");
    let err = repowire_relay::edge::tls::server_config(&empty, &empty).expect_err("no certificate");
    assert!(err.to_string().contains("empty.pem"), "{err}");
    let a = rcgen::generate_simple_self_signed(vec!["a".to_owned()]).expect("cert");
    let b = rcgen::generate_simple_self_signed(vec!["b".to_owned()]).expect("cert");
    let (cert, key) = (dir.path().join("a.pem"), dir.path().join("b.key"));
    std::fs::write(&cert, a.cert.pem()).expect("write");
    std::fs::write(&key, b.signing_key.serialize_pem()).expect("write");
    assert!(
        repowire_relay::edge::tls::server_config(&cert, &key).is_err(),
        "a key that does not match the certificate"
    );
}
