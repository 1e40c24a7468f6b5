//! The `tracing` events of this test process, kept in memory. The agent's libraries log through
//! `tracing` and the `ember` binary installs the subscriber that prints them; in-process tests
//! install this one instead and look for the events themselves (the binary's log format is
//! checked by its own tests, `crates/ember/tests/agent_config.rs` and `logging.rs`).

use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One event: its level, target, message and other fields (`Display`/`Debug` text).
#[derive(Debug, Clone)]
pub struct LogEvent {
    pub level: Level,
    pub target: String,
    pub message: String,
    pub fields: Vec<(String, String)>,
}

impl LogEvent {
    /// The text of field `name`, if the event has it.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every event at INFO or above since [`capture_logs`], from every thread of the process.
static EVENTS: Mutex<Vec<LogEvent>> = Mutex::new(Vec::new());

/// Installs the capturing subscriber as the process's global one (once; later calls do
/// nothing). [`super::RunningAgent::start`] calls it.
pub fn capture_logs() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        tracing::subscriber::set_global_default(Capture)
            .expect("no other global tracing subscriber in the agent tests");
    });
}

/// The captured events whose message is `message`.
pub fn events(message: &str) -> Vec<LogEvent> {
    EVENTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|e| e.message == message)
        .cloned()
        .collect()
}

/// The subscriber: keeps events, ignores spans (the agent logs none that matter here).
struct Capture;

/// Collects an event's fields as text.
#[derive(Default)]
struct Fields {
    message: String,
    fields: Vec<(String, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, format!("{value:?}"));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.fields.push((field.name().to_string(), value));
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        // INFO, WARN and ERROR: what the binary prints by default.
        *metadata.level() <= Level::INFO
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let metadata = event.metadata();
        EVENTS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(LogEvent {
                level: *metadata.level(),
                target: metadata.target().to_string(),
                message: fields.message,
                fields: fields.fields,
            });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Every captured event, one `LEVEL target: message key=value ...` line each: what a failing
/// test prints where the binary's tests printed the agent's stderr.
pub fn log_text() -> String {
    let events = EVENTS.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = String::new();
    for e in events.iter() {
        out.push_str(&format!("{} {}: {}", e.level, e.target, e.message));
        for (k, v) in &e.fields {
            out.push_str(&format!(" {k}={v}"));
        }
        out.push('\n');
    }
    out
}
