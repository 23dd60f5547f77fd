//! The key never reaches a log line: a mint with every log line captured. The capture is this
//! test's thread-local subscriber (its runtime is current-thread, so every task the reconcile
//! spawns logs through it), not the process's: the other tests of this binary keep theirs.

use crate::support;

use std::sync::{Arc, Mutex};

use repowire_operator::crd::{ApiKey, Limits};
use repowire_operator::relay::NewTenant;
use support::*;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn a_minted_key_is_never_logged() {
    let logs = Captured::default();
    let _capture = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(logs.clone())
            .finish(),
    );
    let relay = Relay::start().await;
    let api = ApiServer::default();
    let tenant = relay
        .admin
        .create_tenant(&NewTenant {
            name: "team-a",
            plan: None,
            display_name: None,
            overrides: &Limits::default(),
        })
        .await
        .unwrap();
    api.put(&tenant_path("team-a"), ready_tenant("team-a", &tenant.id));
    api.put(&key_path("agent"), key_object("agent", key_spec("team-a")));
    let ctx = context(&api, relay.admin.clone(), &relay.process.http);
    let key: ApiKey = api.typed(&key_path("agent"));
    repowire_operator::reconcile::apikey::reconcile(Arc::new(key.clone()), ctx.clone())
        .await
        .unwrap();
    // Rotate too, and delete: every path that handles a key.
    let mut obj = api.get(&key_path("agent")).unwrap();
    obj["spec"]["rotation"]["rotationGeneration"] = serde_json::json!(1);
    api.put(&key_path("agent"), obj);
    let key: ApiKey = api.typed(&key_path("agent"));
    repowire_operator::reconcile::apikey::reconcile(Arc::new(key), ctx.clone())
        .await
        .unwrap();
    let text = secret_value(&api.get(&secret_path("agent-key")).unwrap(), "apiKey");
    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(
        logged.contains("minting a key"),
        "the capture works: {logged}"
    );
    assert!(!logged.contains(&text), "the key leaked into the logs");
    assert!(
        !logged.contains(&text[text.len() - 12..]),
        "part of the key leaked into the logs"
    );
}
