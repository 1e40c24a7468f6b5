//! Opening the perf events of a session: cpu-clock per CPU (or per thread of the watched
//! processes), the off-CPU events, and the fallbacks when the kernel refuses some of them.

use super::options::Options;
use crate::SamplerError;
use crate::sys::{self, EventConfig, EventKind, RingBuffer};
use crate::tracepoint::{self, SwitchFormat};
use ember_samples::OffCpuSource;
use std::io;
use std::os::fd::OwnedFd;

fn paranoid_level() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

pub(super) fn open_error(err: io::Error, what: &str) -> SamplerError {
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => SamplerError::Permission {
            what: what.to_string(),
            paranoid: paranoid_level(),
        },
        _ => SamplerError::Open(what.to_string(), err),
    }
}

/// Per-CPU ring buffers plus the extra fds redirected into them.
pub(super) struct Events {
    pub(super) rings: Vec<RingBuffer>,
    pub(super) extra: Vec<OwnedFd>,
    /// Rings from this index on belong to the off-CPU event.
    pub(super) off_cpu_from: usize,
    /// The off-CPU event is the tracepoint (its samples carry raw data).
    pub(super) switch_raw: bool,
}

impl Events {
    pub(super) fn all_fds(&self) -> impl Iterator<Item = &OwnedFd> {
        self.rings.iter().map(|r| r.fd()).chain(self.extra.iter())
    }
}

/// Opens cpu-clock events and, with `opts.off_cpu`, the `sched_switch`
/// tracepoint or context-switch events (in rings of their own, so their
/// samples can be told apart). Returns the tracepoint layout when used.
pub(super) fn open_target_events(
    opts: &Options,
    tasks: &[i32],
    cfg: &mut EventConfig,
    warnings: &mut Vec<String>,
) -> Result<(Events, Option<SwitchFormat>), SamplerError> {
    let mut events = open_events(opts, tasks, cfg, warnings)?;
    if !opts.off_cpu {
        return Ok((events, None));
    }
    let mut format = None;
    let mut more = None;
    if opts.off_cpu_source != OffCpuSource::ContextSwitch {
        let tried = if cfg.exclude_kernel {
            // A tracepoint fires in kernel mode: excluded for this user.
            Err("kernel samples are not allowed for this user".to_string())
        } else {
            tracepoint::sched_switch().and_then(|ss| {
                let tp = EventConfig {
                    kind: EventKind::SchedSwitch { id: ss.id },
                    side_band: false,
                    ..*cfg
                };
                open_events_once(opts, tasks, &tp, warnings)
                    .map(|e| (e, ss.format))
                    .map_err(|e| e.to_string())
            })
        };
        match tried {
            Ok((e, f)) => {
                more = Some(e);
                format = Some(f);
            }
            Err(why) if opts.off_cpu_source == OffCpuSource::Auto => warnings.push(format!(
                "sched:sched_switch tracepoint unavailable ({why}); off-CPU time from \
                 context-switch events instead"
            )),
            Err(why) => {
                return Err(SamplerError::Config(format!(
                    "sched:sched_switch tracepoint unavailable: {why}"
                )));
            }
        }
    }
    let more = match more {
        Some(e) => e,
        None => {
            let mut cs = EventConfig {
                kind: EventKind::ContextSwitch,
                side_band: false,
                ..*cfg
            };
            open_events(opts, tasks, &mut cs, warnings)?
        }
    };
    events.off_cpu_from = events.rings.len();
    events.switch_raw = format.is_some();
    events.rings.extend(more.rings);
    events.extra.extend(more.extra);
    Ok((events, format))
}

/// Opens the events; when the kernel refuses kernel-mode sampling to an
/// unprivileged user, falls back to user-only sampling with a warning.
fn open_events(
    opts: &Options,
    tasks: &[i32],
    cfg: &mut EventConfig,
    warnings: &mut Vec<String>,
) -> Result<Events, SamplerError> {
    match open_events_once(opts, tasks, cfg, warnings) {
        Err(SamplerError::Permission { paranoid, .. })
            if !cfg.exclude_kernel && !tasks.contains(&-1) =>
        {
            cfg.exclude_kernel = true;
            let events = open_events_once(opts, tasks, cfg, warnings)?;
            warnings.push(format!(
                "kernel.perf_event_paranoid = {paranoid} forbids kernel samples for this user: \
                 recording user-space frames only (to include kernel stacks run as root or: \
                 sudo sysctl -w kernel.perf_event_paranoid=1)"
            ));
            Ok(events)
        }
        other => other,
    }
}

fn open_events_once(
    opts: &Options,
    tasks: &[i32],
    cfg: &EventConfig,
    warnings: &mut Vec<String>,
) -> Result<Events, SamplerError> {
    let mut events = Events {
        rings: Vec::new(),
        extra: Vec::new(),
        off_cpu_from: usize::MAX,
        switch_raw: false,
    };
    for cpu in sys::online_cpus() {
        let mut leader: Option<RingBuffer> = None;
        for &task in tasks {
            let fd = match sys::open_event(cfg, task, cpu) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    let msg = format!("thread {task} vanished before it could be attached");
                    if !warnings.contains(&msg) {
                        warnings.push(msg);
                    }
                    continue;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => break,
                Err(e) => {
                    let what = if task < 0 {
                        format!("cpu-clock on CPU {cpu}")
                    } else {
                        format!("cpu-clock for task {task} on CPU {cpu}")
                    };
                    return Err(open_error(e, &what));
                }
            };
            match &leader {
                None => leader = Some(RingBuffer::new(fd, opts.ring_pages)?),
                Some(ring) => {
                    sys::set_output(&fd, ring.fd())
                        .map_err(|e| SamplerError::Open("PERF_EVENT_IOC_SET_OUTPUT".into(), e))?;
                    events.extra.push(fd);
                }
            }
        }
        if let Some(ring) = leader {
            events.rings.push(ring);
        }
    }
    if events.rings.is_empty() {
        return Err(SamplerError::Config(
            "no perf event could be opened (all target processes gone?)".into(),
        ));
    }
    Ok(events)
}

pub(super) fn list_tids(pid: u32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}
