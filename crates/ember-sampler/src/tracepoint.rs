//! The `sched:sched_switch` tracepoint, the source of off-CPU samples:
//! locating tracefs (mounting it when running as root and it is missing),
//! reading the event id, and decoding the `prev_*`/`next_*` fields of its raw
//! record at the offsets its format file gives (they differ between kernels).

use std::path::{Path, PathBuf};

/// Where tracefs is mounted on current systems, and the older debugfs path.
const TRACEFS_DIRS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
const EVENT_DIR: &str = "events/sched/sched_switch";

/// Offset and size of one field inside the raw record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    offset: usize,
    size: usize,
}

impl Field {
    fn bytes<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        raw.get(self.offset..self.offset.checked_add(self.size)?)
    }

    /// An integer field of 1, 2, 4 or 8 bytes (native endianness).
    fn int(&self, raw: &[u8]) -> Option<u64> {
        let b = self.bytes(raw)?;
        Some(match b.len() {
            1 => u64::from(b[0]),
            2 => u64::from(u16::from_ne_bytes(b.try_into().ok()?)),
            4 => u64::from(u32::from_ne_bytes(b.try_into().ok()?)),
            8 => u64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }

    /// A fixed-size, NUL-padded string field.
    fn text<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        let b = self.bytes(raw)?;
        Some(&b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())])
    }
}

/// Field layout of `sched_switch` records on this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchFormat {
    prev_comm: Field,
    prev_pid: Field,
    prev_state: Field,
    next_comm: Field,
    next_pid: Field,
}

/// The fields of one `sched_switch` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchFields<'a> {
    /// Name of the task leaving the CPU.
    pub prev_comm: &'a [u8],
    /// Thread id of the task leaving.
    pub prev_tid: u32,
    /// Its state (`TASK_REPORT` bits; 0 = runnable, 0x100 = preempted).
    pub prev_state: u64,
    /// Name of the task taking the CPU.
    pub next_comm: &'a [u8],
    /// Thread id of the task taking the CPU.
    pub next_tid: u32,
}

/// `prev_state` bits of a task that is exiting (`X` dead, `Z` zombie):
/// its last switch-out is not blocked time.
pub const STATE_EXITING: u64 = 0x10 | 0x20;

impl SwitchFormat {
    /// Parses the `format` file of `sched/sched_switch`. `None` when a
    /// field we need is missing or has an unexpected size.
    pub fn parse(text: &str) -> Option<SwitchFormat> {
        let field = |name: &str| -> Option<Field> {
            text.lines().find_map(|line| {
                let line = line.trim();
                let decl = line.strip_prefix("field:")?.split(';').next()?;
                // "char prev_comm[16]" or "pid_t prev_pid": the last word.
                let last = decl.rsplit(' ').next()?;
                let ident = last.split('[').next()?;
                if ident != name {
                    return None;
                }
                let value = |key: &str| -> Option<usize> {
                    line.split(';')
                        .find_map(|part| part.trim().strip_prefix(key))
                        .and_then(|v| v.trim().parse().ok())
                };
                Some(Field {
                    offset: value("offset:")?,
                    size: value("size:")?,
                })
            })
        };
        let int_ok = |f: Field| matches!(f.size, 1 | 2 | 4 | 8);
        let format = SwitchFormat {
            prev_comm: field("prev_comm")?,
            prev_pid: field("prev_pid").filter(|&f| int_ok(f))?,
            prev_state: field("prev_state").filter(|&f| int_ok(f))?,
            next_comm: field("next_comm")?,
            next_pid: field("next_pid").filter(|&f| int_ok(f))?,
        };
        Some(format)
    }

    /// Decodes one raw record (`PERF_SAMPLE_RAW` payload); `None` when it
    /// is too short for the layout.
    pub fn decode<'a>(&self, raw: &'a [u8]) -> Option<SwitchFields<'a>> {
        Some(SwitchFields {
            prev_comm: self.prev_comm.text(raw)?,
            prev_tid: self.prev_pid.int(raw)? as u32,
            prev_state: self.prev_state.int(raw)?,
            next_comm: self.next_comm.text(raw)?,
            next_tid: self.next_pid.int(raw)? as u32,
        })
    }
}

/// The tracepoint as found on this system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedSwitch {
    /// Tracepoint id (`perf_event_attr.config` for `PERF_TYPE_TRACEPOINT`).
    pub id: u64,
    /// Record layout.
    pub format: SwitchFormat,
}

fn event_dir() -> Option<PathBuf> {
    TRACEFS_DIRS
        .iter()
        .map(|d| Path::new(d).join(EVENT_DIR))
        .find(|p| p.join("id").exists())
}

/// Mounts tracefs at /sys/kernel/tracing (what `mount -t tracefs nodev
/// /sys/kernel/tracing` does). Only attempted as root.
fn mount_tracefs() -> Result<(), std::io::Error> {
    // SAFETY: all pointers are NUL-terminated static strings; no data
    // argument. mount(2) has no other memory-safety preconditions.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Finds `sched:sched_switch`, mounting tracefs first when it is missing and
/// we are root. The error says why it is unavailable and what to run.
pub fn sched_switch() -> Result<SchedSwitch, String> {
    let dir = match event_dir() {
        Some(dir) => dir,
        None => {
            // SAFETY: geteuid has no preconditions.
            let root = unsafe { libc::geteuid() } == 0;
            let mounted = root && mount_tracefs().is_ok();
            match event_dir().filter(|_| mounted) {
                Some(dir) => dir,
                None => {
                    return Err(
                        "tracefs is not mounted (as root: mount -t tracefs nodev /sys/kernel/tracing)"
                            .into(),
                    );
                }
            }
        }
    };
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .map_err(|e| format!("cannot read {}: {e}", dir.join(name).display()))
    };
    let id = read("id")?
        .trim()
        .parse::<u64>()
        .map_err(|e| format!("bad tracepoint id in {}: {e}", dir.display()))?;
    let format = SwitchFormat::parse(&read("format")?)
        .ok_or_else(|| format!("unexpected layout in {}/format", dir.display()))?;
    Ok(SchedSwitch { id, format })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw record laid out as `format` says, from the given values.
    fn encode(format: &SwitchFormat, prev: (&[u8], u32, u64), next: (&[u8], u32)) -> Vec<u8> {
        let fields = [
            format.prev_comm,
            format.prev_pid,
            format.prev_state,
            format.next_comm,
            format.next_pid,
        ];
        let len = fields.iter().map(|f| f.offset + f.size).max().unwrap();
        let mut raw = vec![0u8; len];
        let mut put = |f: Field, bytes: &[u8]| {
            raw[f.offset..f.offset + bytes.len().min(f.size)]
                .copy_from_slice(&bytes[..bytes.len().min(f.size)]);
        };
        put(format.prev_comm, prev.0);
        put(format.prev_pid, &prev.1.to_ne_bytes());
        put(
            format.prev_state,
            &prev.2.to_ne_bytes()[..format.prev_state.size],
        );
        put(format.next_comm, next.0);
        put(format.next_pid, &next.1.to_ne_bytes());
        raw
    }

    #[test]
    fn this_kernels_format_round_trips() {
        // Needs tracefs (mounted here when root); skip quietly otherwise.
        let Ok(ss) = sched_switch() else {
            eprintln!("sched_switch tracepoint not available; skipped");
            return;
        };
        assert!(ss.id > 0);
        let raw = encode(&ss.format, (b"worker", 4242, 0x1), (b"swapper/1", 0));
        let f = ss.format.decode(&raw).unwrap();
        assert_eq!(f.prev_comm, b"worker");
        assert_eq!((f.prev_tid, f.prev_state), (4242, 1));
        assert_eq!((f.next_comm, f.next_tid), (&b"swapper/1"[..], 0));
        // Truncated records are refused, not misread.
        assert!(ss.format.decode(&raw[..raw.len() - 1]).is_none());
    }

    #[test]
    fn formats_without_the_fields_are_refused() {
        assert!(SwitchFormat::parse("").is_none());
        let text = "format:\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                    \tfield:pid_t prev_pid;\toffset:24;\tsize:3;\tsigned:1;\n";
        assert!(SwitchFormat::parse(text).is_none());
    }
}
