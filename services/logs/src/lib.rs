//! How the relay, the operator and the client daemon write logs: one format switch (JSON lines
//! for collectors, text for people), one filter rule (`RUST_LOG` when set and valid, else the
//! binary's default), colours only on a terminal. Each binary composes the layer with what is
//! its own (the relay adds OTLP spans; the daemon takes its filter from its config file).

use std::io::IsTerminal;

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (the event's fields flattened in).
    Json,
    /// For people.
    Text,
}

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output (a server's log, collected by its platform).
    Stdout,
    /// Standard error (a command's diagnostics, kept apart from its output).
    Stderr,
}

/// `RUST_LOG` when it is set and parses, else `default` (an `EnvFilter` directive list).
pub fn env_filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))
}

/// `directives` when they parse, else `fallback` (for a filter read from a config file).
pub fn filter_or(directives: &str, fallback: &str) -> EnvFilter {
    EnvFilter::try_new(directives).unwrap_or_else(|_| EnvFilter::new(fallback))
}

/// The log layer in `format`, writing to `stream`, colours only when that stream is a terminal.
pub fn layer<S>(format: LogFormat, stream: Stream) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    match stream {
        Stream::Stdout => layer_to(format, std::io::stdout, std::io::stdout().is_terminal()),
        Stream::Stderr => layer_to(format, std::io::stderr, std::io::stderr().is_terminal()),
    }
}

/// [`layer`] with any writer (tests capture logs this way).
pub fn layer_to<S, W>(format: LogFormat, writer: W, ansi: bool) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer);
    match format {
        LogFormat::Json => fmt.json().flatten_event(true).boxed(),
        LogFormat::Text => fmt.with_ansi(ansi).boxed(),
    }
}

/// Installs the global subscriber: [`layer`] under `filter`. For binaries with nothing else to
/// add (the operator, the client daemon, the relay's admin commands).
pub fn init(format: LogFormat, stream: Stream, filter: EnvFilter) {
    tracing_subscriber::registry()
        .with(layer(format, stream).with_filter(filter))
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(format: LogFormat) -> String {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::registry().with(
            layer_to(format, move || writer.clone(), false).with_filter(filter_or("info", "info")),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(tenant = "tnt-1", "connected");
            tracing::debug!("below the filter");
        });
        let bytes = out.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8(bytes).unwrap_or_default()
    }

    #[test]
    fn json_lines_carry_the_event_fields_at_the_top_level() {
        let text = logged(LogFormat::Json);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(lines[0]).expect("one JSON object");
        assert_eq!(line["tenant"], "tnt-1");
        assert_eq!(line["message"], "connected");
        assert_eq!(line["level"], "INFO");
    }

    #[test]
    fn text_lines_are_for_people_without_colour_codes_off_a_terminal() {
        let text = logged(LogFormat::Text);
        assert!(
            text.contains("connected") && text.contains("tenant=\"tnt-1\""),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(!text.contains("below the filter"));
    }

    #[test]
    fn a_filter_that_does_not_parse_falls_back() {
        assert_eq!(filter_or("not a [valid filter", "warn").to_string(), "warn");
    }
}
