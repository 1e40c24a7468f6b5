//! The server profiles of one upload interval: the merged recording is split per process by
//! `ember-samples`, each process is labelled from `/proc`, filtered by the target rules and
//! relabelled here, and only the processes that are sent are turned into pprof (by
//! `ember-samples`) and queued on the [`Outbox`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ember_samples::{Recording, Symbolizer};

use super::Push;
use super::filter::Filter;
use super::process::{ProcessMeta, derive_service_name, hostname};
use crate::Outbox;
use crate::metrics::Metrics;
use crate::relabel::{self, Labels};

/// Labels, filters and queues the per-process profiles of merged cuts.
pub(super) struct Emitter {
    hostname: String,
    filter: Filter,
    rules: Vec<relabel::Rule>,
    outbox: Arc<Outbox>,
    metrics: Arc<Metrics>,
}

impl Emitter {
    /// An emitter queueing on `outbox`, counting in `metrics`.
    pub(super) fn new(
        filter: Filter,
        rules: Vec<relabel::Rule>,
        outbox: Arc<Outbox>,
        metrics: Arc<Metrics>,
    ) -> Emitter {
        Emitter {
            hostname: hostname(),
            filter,
            rules,
            outbox,
            metrics,
        }
    }

    /// Splits `rec` per process, labels, filters and queues each profile.
    pub(super) fn emit(&self, rec: Recording, push: Push, symbolizer: &mut Symbolizer) {
        let profiler = &self.metrics.profiler;
        profiler.samples.fetch_add(rec.samples, Ordering::Relaxed);
        profiler.lost.fetch_add(rec.lost, Ordering::Relaxed);
        if !push.cpu && !push.off_cpu {
            return;
        }
        // One pass over the kernel symbols for the whole cut rather than one per process:
        // that was ~80 % of the agent's CPU on a busy host (bench/agent/RESULTS.md).
        symbolizer.prepare_kernel_of(&rec);
        let mut filtered = 0;
        for (pid, part) in rec.split_by_process() {
            // pid 0 is the idle task: nothing to attribute.
            if pid == 0 {
                continue;
            }
            let meta = ProcessMeta::read(pid, part.first_comm());
            let Some(labels) = self.labels(&meta, symbolizer) else {
                filtered += 1;
                continue;
            };
            let (profile, _) = ember_samples::build_profile(&part, symbolizer);
            profiler.profiles.fetch_add(1, Ordering::Relaxed);
            self.outbox.send(labels, ember_pprof::encode_gzip(&profile));
        }
        profiler
            .filtered_processes
            .store(filtered, Ordering::Relaxed);
    }

    /// The series labels of a process, or `None` when the target rules or the relabelling
    /// drop it.
    fn labels(&self, meta: &ProcessMeta, symbolizer: &mut Symbolizer) -> Option<Labels> {
        if !self.filter.matches(meta) {
            return None;
        }
        let mut labels = Labels::new();
        labels.insert("__meta_process_pid".into(), meta.pid.to_string());
        labels.insert("__meta_process_comm".into(), meta.comm.clone());
        labels.insert("__meta_process_exe".into(), meta.exe.clone());
        labels.insert("__meta_process_cmdline".into(), meta.cmdline.clone());
        labels.insert("__meta_process_cgroup".into(), meta.cgroup.clone());
        labels.insert("__meta_system_hostname".into(), self.hostname.clone());
        labels.insert("service_name".into(), derive_service_name(meta));
        let build_id = if meta.exe.is_empty() {
            String::new()
        } else {
            symbolizer.build_id(&meta.exe, meta.pid)
        };
        labels.insert("__meta_process_build_id".into(), build_id);
        let mut labels = relabel::apply(&self.rules, labels)?;
        relabel::drop_meta(&mut labels);
        labels.insert("__name__".into(), "process_cpu".into());
        if labels.get("service_name").is_none_or(|s| s.is_empty()) {
            labels.insert("service_name".into(), derive_service_name(meta));
        }
        Some(labels)
    }
}
