//! Labels on samples that follow the work, not the OS thread.
//!
//! A label scope is a set of `key = value` pairs pushed on the current thread for as long as
//! some work runs; the `SIGPROF` handler copies the thread's scopes into each sample and the
//! heap sampler into each sampled allocation. Scopes nest: inner pairs override outer pairs
//! with the same key, the others are merged (a service's labels and the [`ProfilingLayer`]'s
//! span labels end up side by side, never replacing each other).
//!
//! Async work is labelled per poll: [`LabelsExt::with_labels`] wraps a future so that every
//! poll pushes its scope on whichever worker thread runs it and pops it before returning, so
//! the labels stay right when a multi-threaded tokio runtime moves the task between threads.
//! The [`ProfilingLayer`] does the same with `tracing` spans (an instrumented future enters
//! its span on every poll, on the polling thread). For synchronous code, [`Labels::scope`]
//! and [`Labels::enter`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tracing::span;
use tracing_subscriber::layer::{Context as LayerContext, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::signal;

/// An immutable set of labels, encoded once (`key\0value\0` pairs) so that attaching it to
/// a thread costs two stores and no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels(Arc<[u8]>);

impl Labels {
    /// Builds a label set. NUL bytes in keys and values are dropped; empty keys are skipped.
    pub fn new<K: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (K, V)>) -> Labels {
        let mut bytes = Vec::new();
        for (k, v) in pairs {
            let (k, v) = (k.as_ref(), v.as_ref());
            if k.is_empty() {
                continue;
            }
            bytes.extend(k.bytes().filter(|&b| b != 0));
            bytes.push(0);
            bytes.extend(v.bytes().filter(|&b| b != 0));
            bytes.push(0);
        }
        Labels(bytes.into())
    }

    /// Runs `f` with these labels on the current thread's samples.
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _guard = self.enter();
        f()
    }

    /// Attaches these labels to the current thread until the guard is dropped. The guard is
    /// not `Send`: it cannot be held across an `.await` of a task that may move (use
    /// [`LabelsExt::with_labels`] for futures).
    pub fn enter(&self) -> LabelGuard<'_> {
        signal::push_labels(&self.0);
        LabelGuard {
            _labels: self,
            _not_send: std::marker::PhantomData,
        }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Keeps a [`Labels`] scope attached to the current thread; see [`Labels::enter`].
#[derive(Debug)]
pub struct LabelGuard<'a> {
    _labels: &'a Labels,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for LabelGuard<'_> {
    fn drop(&mut self) {
        signal::pop_labels();
    }
}

/// Decodes scopes copied by the handler (outermost first) into pairs sorted by key; an inner
/// scope's value wins over an outer one's for the same key.
pub(crate) fn decode(bytes: &[u8], out: &mut Vec<(String, String)>) {
    out.clear();
    let mut parts = bytes.split(|&b| b == 0);
    while let (Some(k), Some(v)) = (parts.next(), parts.next()) {
        if k.is_empty() {
            continue;
        }
        let k = String::from_utf8_lossy(k).into_owned();
        let v = String::from_utf8_lossy(v).into_owned();
        match out.iter_mut().find(|(ok, _)| *ok == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        }
    }
    out.sort();
}

/// A future whose every poll runs inside a label scope; see [`LabelsExt::with_labels`].
#[derive(Debug)]
pub struct WithLabels<F> {
    inner: Pin<Box<F>>,
    labels: Labels,
}

impl<F: Future> Future for WithLabels<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let _guard = this.labels.enter();
        this.inner.as_mut().poll(cx)
    }
}

/// Attaches labels to a future's samples, whichever thread polls it.
pub trait LabelsExt: Future + Sized {
    /// Wraps the future so that its samples (and those of everything it awaits inline)
    /// carry `labels`, merged with any scopes already active around each poll.
    fn with_labels(self, labels: Labels) -> WithLabels<Self> {
        WithLabels {
            inner: Box::pin(self),
            labels,
        }
    }
}

impl<F: Future> LabelsExt for F {}

/// A `tracing` layer that labels samples taken inside a span with `span_id` (16 hex
/// digits, unique per span for the life of the process), `trace_id` (the span's `trace_id`
/// field when it has one, else inherited from its parent, else the root span's `span_id`)
/// and `span_name`. Add it to a `tracing_subscriber::Registry`:
///
/// ```no_run
/// use tracing_subscriber::layer::SubscriberExt;
/// let subscriber = tracing_subscriber::registry().with(ember_sdk::ProfilingLayer::new());
/// tracing::subscriber::set_global_default(subscriber).unwrap();
/// ```
#[derive(Debug, Default)]
pub struct ProfilingLayer {
    _private: (),
}

impl ProfilingLayer {
    /// A new layer.
    pub fn new() -> ProfilingLayer {
        ProfilingLayer::default()
    }
}

/// What the layer keeps in each span's extensions.
struct SpanLabels {
    labels: Labels,
    trace_id: String,
}

/// Span ids: tracing reuses its `Id`s once spans close, so the layer numbers spans itself,
/// from a start that differs between runs.
static NEXT_SPAN: AtomicU64 = AtomicU64::new(0);

fn next_span_id() -> u64 {
    if NEXT_SPAN.load(Ordering::Relaxed) == 0 {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            | 1;
        let _ = NEXT_SPAN.compare_exchange(0, seed, Ordering::Relaxed, Ordering::Relaxed);
    }
    NEXT_SPAN.fetch_add(1, Ordering::Relaxed)
}

#[derive(Default)]
struct TraceIdVisitor(Option<String>);

impl tracing::field::Visit for TraceIdVisitor {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "trace_id" {
            self.0 = Some(value.to_string());
        }
    }

    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "trace_id" {
            self.0 = Some(format!("{value:016x}"));
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "trace_id" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S> Layer<S> for ProfilingLayer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let span_id = format!("{:016x}", next_span_id());
        let mut visitor = TraceIdVisitor::default();
        attrs.record(&mut visitor);
        let trace_id = visitor
            .0
            .or_else(|| {
                span.parent().and_then(|p| {
                    p.extensions()
                        .get::<SpanLabels>()
                        .map(|l| l.trace_id.clone())
                })
            })
            .unwrap_or_else(|| span_id.clone());
        let labels = Labels::new([
            ("span_id", span_id.as_str()),
            ("trace_id", trace_id.as_str()),
            ("span_name", span.name()),
        ]);
        span.extensions_mut()
            .insert(SpanLabels { labels, trace_id });
    }

    fn on_enter(&self, id: &span::Id, ctx: LayerContext<'_, S>) {
        if let Some(span) = ctx.span(id) {
            match span.extensions().get::<SpanLabels>() {
                // The bytes live in the span's extensions until it closes, after its last exit.
                Some(l) => signal::push_labels(l.labels.bytes()),
                None => signal::push_labels(&[]),
            };
        }
    }

    fn on_exit(&self, id: &span::Id, ctx: LayerContext<'_, S>) {
        if ctx.span(id).is_some() {
            signal::pop_labels();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_scopes_override_outer_keys_and_merge_the_rest() {
        let outer = Labels::new([("service", "api"), ("span_id", "1")]);
        let inner = Labels::new([("span_id", "2"), ("span_name", "h\0x")]);
        let mut bytes = outer.bytes().to_vec();
        bytes.extend_from_slice(inner.bytes());
        let mut out = Vec::new();
        decode(&bytes, &mut out);
        let want = [("service", "api"), ("span_id", "2"), ("span_name", "hx")];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(out, want);
    }

    #[test]
    fn scopes_nest_on_the_thread() {
        let a = Labels::new([("a", "1")]);
        let b = Labels::new([("b", "2")]);
        let mut seen = Vec::new();
        a.scope(|| b.scope(|| signal::current_labels(&mut seen)));
        let mut out = Vec::new();
        decode(&seen, &mut out);
        assert_eq!(out.len(), 2);
        seen.clear();
        signal::current_labels(&mut seen);
        assert!(seen.is_empty(), "scopes popped");
    }
}
