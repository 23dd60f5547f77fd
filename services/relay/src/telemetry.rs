//! Traces across pods: spans exported over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, and
//! the W3C trace context (`traceparent`) carried in frames and bus events, so one message's path
//! (the sender, the pod that persisted it, the pod that pushed it, the receipts coming back) is
//! one trace.
//!
//! A request's [`Trace`] starts where its frame is handled, continuing the frame's
//! `traceparent`. It travels with the request's write ([`crate::storage::writer::Origin`]) and is current
//! while the dispatcher turns the write's outcome into frames: every frame built then carries it
//! ([`crate::routing::dispatch::frame_text`]), and so does every bus event sent then. A pod receiving a
//! forwarded frame continues the trace in a span of its own.
//!
//! With export off, no span is made and the relay hands a client's `traceparent` on unchanged,
//! so clients that trace can still follow a message through it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `tracing` target of the spans that are exported (and only those are).
pub const TARGET: &str = "repowire::trace";

const TRACEPARENT: &str = "traceparent";

static EXPORTING: AtomicBool = AtomicBool::new(false);

thread_local! {
    static CURRENT: RefCell<Option<String>> = const { RefCell::new(None) };
}

tokio::task_local! {
    static REQUEST: Trace;
}

/// The trace a request belongs to: its span (disabled when nothing is exported) and the
/// `traceparent` to put on what it causes.
#[derive(Debug, Clone)]
pub struct Trace {
    span: Span,
    traceparent: Option<String>,
}

impl Trace {
    /// No trace.
    pub fn none() -> Self {
        Self {
            span: Span::none(),
            traceparent: None,
        }
    }

    /// A span named `name` continuing `parent` (a `traceparent` the protocol crate validated),
    /// or starting a trace when there is none. `kind` is the OpenTelemetry span kind.
    pub fn start(name: &'static str, kind: &'static str, parent: Option<&str>) -> Self {
        if !EXPORTING.load(Ordering::Relaxed) {
            return Self {
                span: Span::none(),
                traceparent: parent.map(str::to_owned),
            };
        }
        let span = tracing::info_span!(
            target: TARGET,
            "relay",
            otel.name = name,
            otel.kind = kind,
            repowire.frame_id = tracing::field::Empty
        );
        if let Some(parent) = parent {
            let carrier = HashMap::from([(TRACEPARENT.to_owned(), parent.to_owned())]);
            // Fails only for a disabled span, which then simply has no parent.
            let _ = span.set_parent(TraceContextPropagator::new().extract(&carrier));
        }
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&span.context(), &mut carrier);
        let traceparent = carrier
            .remove(TRACEPARENT)
            .or_else(|| parent.map(str::to_owned));
        Self { span, traceparent }
    }

    /// What frames caused by this request carry.
    pub fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_deref()
    }

    /// The span (to record fields on, or to instrument a future with).
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Runs synchronous `f` with this trace current on this thread: frames built inside carry
    /// it (see [`current_traceparent`]).
    pub fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<String>);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| *c.borrow_mut() = self.0.take());
            }
        }
        let _entered = self.span.enter();
        let _restore = Restore(CURRENT.with(|c| c.replace(self.traceparent.clone())));
        f()
    }

    /// Runs a request handler with this trace as the task's request trace (see [`request`]).
    pub async fn scope<F: Future>(self, f: F) -> F::Output {
        REQUEST.scope(self, f).await
    }
}

/// The `traceparent` frames built now should carry: the trace current on this thread
/// ([`Trace::in_scope`]), else the request this task is handling ([`Trace::scope`]), if any.
pub fn current_traceparent() -> Option<String> {
    CURRENT
        .with(|c| c.borrow().clone())
        .or_else(|| REQUEST.try_with(|t| t.traceparent.clone()).ok().flatten())
}

/// The trace of the request this task is handling ([`Trace::scope`]), or none.
pub fn request() -> Trace {
    REQUEST
        .try_with(Clone::clone)
        .unwrap_or_else(|_| Trace::none())
}

/// Span export to an OTLP collector; shut it down before exiting so the last spans leave.
/// (The `otlp` feature: a relay embedded in the client never exports.)
#[cfg(feature = "otlp")]
#[derive(Debug)]
pub struct Exporter {
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
}

#[cfg(feature = "otlp")]
impl Exporter {
    /// Exports over OTLP/gRPC to `endpoint`, from the current tokio runtime (call inside it).
    /// `pod` becomes the resource's `service.instance.id`; `service.name` is
    /// `repowire-relay` unless `OTEL_SERVICE_NAME` says otherwise.
    pub fn otlp<S>(
        endpoint: &str,
        pod: &str,
    ) -> anyhow::Result<(Self, impl tracing_subscriber::Layer<S>)>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        use opentelemetry::trace::TracerProvider as _;
        use opentelemetry_otlp::WithExportConfig;
        use opentelemetry_sdk::trace::SdkTracerProvider;
        use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()?;
        let processor =
            BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
        let mut resource = opentelemetry_sdk::Resource::builder().with_attribute(
            opentelemetry::KeyValue::new("service.instance.id", pod.to_owned()),
        );
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("repowire-relay");
        }
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource.build())
            .build();
        use tracing_subscriber::Layer as _;
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("repowire-relay"))
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(TARGET, tracing::Level::INFO),
            );
        EXPORTING.store(true, Ordering::Relaxed);
        Ok((Self { provider }, layer))
    }

    /// Flushes what is buffered and stops exporting. Call outside async code (it blocks until
    /// the runtime's export task is done), while the runtime is still alive.
    pub fn shutdown(self) {
        EXPORTING.store(false, Ordering::Relaxed);
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "flushing traces at exit failed");
        }
    }
}
