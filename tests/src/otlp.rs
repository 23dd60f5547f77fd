//! An OTLP/gRPC trace collector for tests: the real OTLP `TraceService` (the protocol's own
//! generated definition) served by tonic on a loopback port, keeping every span it receives.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;

/// One received span, ids in lowercase hex as in a `traceparent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectedSpan {
    /// The exporting process's `service.instance.id` (the relay's pod id).
    pub instance: String,
    /// The exporting process's `service.name`.
    pub service: String,
    /// Span name.
    pub name: String,
    /// Trace id (32 hex digits).
    pub trace_id: String,
    /// Span id (16 hex digits).
    pub span_id: String,
    /// Parent span id (16 hex digits), empty for a root span.
    pub parent_span_id: String,
}

/// The collector; it stops when dropped.
pub struct Collector {
    /// `http://127.0.0.1:PORT`, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: String,
    spans: Arc<Mutex<Vec<CollectedSpan>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Sink(Arc<Mutex<Vec<CollectedSpan>>>);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut out = Vec::new();
        for rs in request.into_inner().resource_spans {
            let attr = |key: &str| {
                rs.resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|kv| kv.key == key)
                    .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                        Value::StringValue(s) => Some(s.clone()),
                        _ => None,
                    })
                    .unwrap_or_default()
            };
            let (instance, service) = (attr("service.instance.id"), attr("service.name"));
            for span in rs.scope_spans.iter().flat_map(|s| &s.spans) {
                out.push(CollectedSpan {
                    instance: instance.clone(),
                    service: service.clone(),
                    name: span.name.clone(),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                });
            }
        }
        self.0.lock().expect("spans").extend(out);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl Collector {
    /// Listens on an ephemeral loopback port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind collector");
        let addr = listener.local_addr().expect("addr");
        let spans = Arc::new(Mutex::new(Vec::new()));
        let service = TraceServiceServer::new(Sink(spans.clone()));
        let task = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            if let Err(e) = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await
            {
                eprintln!("collector stopped: {e}");
            }
        });
        Self {
            endpoint: format!("http://{addr}"),
            spans,
            task,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<CollectedSpan> {
        self.spans.lock().expect("spans").clone()
    }
}
