//! Decoding of perf ring-buffer records (the layout requested by
//! [`crate::sys::SAMPLE_TYPE`] with `sample_id_all`), in safe code.
//!
//! Malformed or truncated records are skipped, never trusted: the decoder
//! bounds-checks every field and stops at the first inconsistent header.

/// `PERF_RECORD_*` type numbers we decode.
mod kind {
    pub(super) const LOST: u32 = 2;
    pub(super) const COMM: u32 = 3;
    pub(super) const EXIT: u32 = 4;
    pub(super) const FORK: u32 = 7;
    pub(super) const SAMPLE: u32 = 9;
    pub(super) const MMAP2: u32 = 10;
    pub(super) const LOST_SAMPLES: u32 = 13;
    pub(super) const SWITCH: u32 = 14;
    pub(super) const SWITCH_CPU_WIDE: u32 = 15;
}

/// `misc` flag on COMM records emitted by `exec`.
const MISC_COMM_EXEC: u16 = 1 << 13;
/// `misc` flag on SWITCH records for a task leaving the CPU.
const MISC_SWITCH_OUT: u16 = 1 << 13;
/// `misc` flag on MMAP2 records that carry a build-id instead of inode data.
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// Size of the `sample_id_all` trailer for our sample type: (pid, tid), time, (cpu, res).
const SAMPLE_ID_LEN: usize = 24;

/// Identity fields that every record carries (from the sample_id trailer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleId {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CLOCK_MONOTONIC timestamp in nanoseconds.
    pub time: u64,
    /// CPU the record was written on.
    pub cpu: u32,
}

/// One sample: where the task was when the cpu-clock fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRecord {
    /// Identity and time.
    pub id: SampleId,
    /// Instruction pointer.
    pub ip: u64,
    /// Event period (nanoseconds of CPU time for cpu-clock).
    pub period: u64,
    /// Raw callchain including `PERF_CONTEXT_*` markers, leaf first.
    pub callchain: Vec<u64>,
    /// User registers in `perf_regs` bit order (empty when the sample hit a
    /// kernel thread or none were requested).
    pub user_regs: Vec<u64>,
    /// Copy of the user stack from the sampled stack pointer upwards.
    pub user_stack: Vec<u8>,
    /// Taken by the context-switch event (the task is leaving the CPU),
    /// not by cpu-clock. Set by the reader, which knows the ring's event.
    pub off_cpu: bool,
    /// The tracepoint's raw record (PERF_SAMPLE_RAW), empty otherwise.
    pub raw: Vec<u8>,
}

/// Which optional sample fields the events were opened with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layout {
    /// Number of user registers requested (bits set in the mask); 0 means
    /// neither PERF_SAMPLE_REGS_USER nor PERF_SAMPLE_STACK_USER.
    pub user_regs: usize,
    /// Samples carry PERF_SAMPLE_RAW (tracepoint records).
    pub raw: bool,
}

/// An executable mapping created in a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mmap2Record {
    /// Identity and time.
    pub id: SampleId,
    /// Process the mapping belongs to.
    pub pid: u32,
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// File offset of the first mapped byte.
    pub pgoff: u64,
    /// Build-id bytes when the kernel included them.
    pub build_id: Option<Vec<u8>>,
    /// Mapped path (or a pseudo name such as `//anon`).
    pub filename: String,
}

/// A decoded ring-buffer record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A stack sample.
    Sample(SampleRecord),
    /// An executable mapping.
    Mmap2(Mmap2Record),
    /// A task's name changed (`exec` when `exec` is set).
    Comm {
        /// Identity and time.
        id: SampleId,
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// New name.
        comm: String,
        /// The rename came from `exec`.
        exec: bool,
    },
    /// A task was created.
    Fork {
        /// Identity and time.
        id: SampleId,
        /// New task's process id.
        pid: u32,
        /// Parent process id.
        ppid: u32,
        /// New task's thread id.
        tid: u32,
        /// Parent thread id.
        ptid: u32,
    },
    /// A task exited.
    Exit {
        /// Identity and time.
        id: SampleId,
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
    },
    /// A task was switched in or out (the task is in `id`).
    Switch {
        /// Identity and time.
        id: SampleId,
        /// The task left the CPU (else it arrived).
        out: bool,
        /// The task on the other side of the switch (pid, tid): the one
        /// arriving when `out`, the one leaving otherwise. Only CPU-wide
        /// records carry it.
        other: Option<(u32, u32)>,
    },
    /// The kernel dropped records because the buffer was full.
    Lost {
        /// Identity and time.
        id: SampleId,
        /// Number of records lost.
        lost: u64,
        /// Lost from the buffer of an off-CPU event (switches). Set by the
        /// reader, which knows the ring's event.
        off_cpu: bool,
    },
}

impl Record {
    /// Timestamp used to order records across CPUs.
    pub fn time(&self) -> u64 {
        match self {
            Record::Sample(s) => s.id.time,
            Record::Mmap2(m) => m.id.time,
            Record::Comm { id, .. }
            | Record::Fork { id, .. }
            | Record::Exit { id, .. }
            | Record::Switch { id, .. }
            | Record::Lost { id, .. } => id.time,
        }
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn u32(&mut self) -> Option<u32> {
        let bytes = self.data.get(self.pos..self.pos + 4)?;
        self.pos += 4;
        Some(u32::from_ne_bytes(bytes.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        let bytes = self.data.get(self.pos..self.pos + 8)?;
        self.pos += 8;
        Some(u64::from_ne_bytes(bytes.try_into().ok()?))
    }
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let bytes = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(bytes)
    }
    /// A NUL-terminated string padded to 8 bytes, limited to `end`.
    fn cstring(&mut self, end: usize) -> Option<String> {
        let rest = self.data.get(self.pos..end)?;
        let len = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        self.pos = end;
        Some(String::from_utf8_lossy(&rest[..len]).into_owned())
    }
}

fn sample_id(body: &[u8]) -> SampleId {
    if body.len() < SAMPLE_ID_LEN {
        return SampleId::default();
    }
    let mut c = Cursor {
        data: body,
        pos: body.len() - SAMPLE_ID_LEN,
    };
    let mut id = SampleId::default();
    if let (Some(pid), Some(tid), Some(time), Some(cpu)) = (c.u32(), c.u32(), c.u64(), c.u32()) {
        id = SampleId {
            pid,
            tid,
            time,
            cpu,
        };
    }
    id
}

fn parse_sample(body: &[u8], layout: Layout) -> Option<SampleRecord> {
    let mut c = Cursor { data: body, pos: 0 };
    let ip = c.u64()?;
    let pid = c.u32()?;
    let tid = c.u32()?;
    let time = c.u64()?;
    let cpu = c.u32()?;
    let _res = c.u32()?;
    let period = c.u64()?;
    let nr = c.u64()?;
    // Each entry is 8 bytes; refuse counts the record cannot hold.
    if nr > (body.len() as u64) / 8 {
        return None;
    }
    let mut callchain = Vec::with_capacity(nr as usize);
    for _ in 0..nr {
        callchain.push(c.u64()?);
    }
    let mut raw = Vec::new();
    if layout.raw {
        // u32 size, then that many bytes (padded by the kernel so the
        // sample stays 8-byte aligned).
        let size = c.u32()?;
        raw.extend_from_slice(c.bytes(usize::try_from(size).ok()?)?);
    }
    let mut user_regs = Vec::new();
    let mut user_stack = Vec::new();
    if layout.user_regs > 0 {
        let abi = c.u64()?;
        if abi != 0 {
            for _ in 0..layout.user_regs {
                user_regs.push(c.u64()?);
            }
        }
        let size = c.u64()?;
        if size > 0 {
            let data = c.bytes(usize::try_from(size).ok()?)?;
            let dyn_size = c.u64()?.min(size);
            user_stack.extend_from_slice(&data[..dyn_size as usize]);
        }
    }
    Some(SampleRecord {
        id: SampleId {
            pid,
            tid,
            time,
            cpu,
        },
        ip,
        period,
        callchain,
        user_regs,
        user_stack,
        off_cpu: false,
        raw,
    })
}

fn parse_one(kind: u32, misc: u16, body: &[u8], layout: Layout) -> Option<Record> {
    let mut c = Cursor { data: body, pos: 0 };
    let trailer_start = body.len().saturating_sub(SAMPLE_ID_LEN);
    match kind {
        kind::SAMPLE => parse_sample(body, layout).map(Record::Sample),
        kind::MMAP2 => {
            let pid = c.u32()?;
            let _tid = c.u32()?;
            let addr = c.u64()?;
            let len = c.u64()?;
            let pgoff = c.u64()?;
            let build_id = if misc & MISC_MMAP_BUILD_ID != 0 {
                let head = c.bytes(4)?;
                let size = usize::from(head[0]).min(20);
                let raw = c.bytes(20)?;
                Some(raw[..size].to_vec())
            } else {
                let _maj_min = c.u64()?;
                let _ino = c.u64()?;
                let _ino_generation = c.u64()?;
                None
            };
            let _prot = c.u32()?;
            let _flags = c.u32()?;
            let filename = c.cstring(trailer_start)?;
            Some(Record::Mmap2(Mmap2Record {
                id: sample_id(body),
                pid,
                addr,
                len,
                pgoff,
                build_id,
                filename,
            }))
        }
        kind::COMM => {
            let pid = c.u32()?;
            let tid = c.u32()?;
            let comm = c.cstring(trailer_start)?;
            Some(Record::Comm {
                id: sample_id(body),
                pid,
                tid,
                comm,
                exec: misc & MISC_COMM_EXEC != 0,
            })
        }
        kind::FORK | kind::EXIT => {
            let pid = c.u32()?;
            let ppid = c.u32()?;
            let tid = c.u32()?;
            let ptid = c.u32()?;
            let id = sample_id(body);
            Some(if kind == kind::FORK {
                Record::Fork {
                    id,
                    pid,
                    ppid,
                    tid,
                    ptid,
                }
            } else {
                Record::Exit { id, pid, tid }
            })
        }
        kind::LOST => {
            let _id = c.u64()?;
            let lost = c.u64()?;
            Some(Record::Lost {
                id: sample_id(body),
                lost,
                off_cpu: false,
            })
        }
        kind::SWITCH => Some(Record::Switch {
            id: sample_id(body),
            out: misc & MISC_SWITCH_OUT != 0,
            other: None,
        }),
        kind::SWITCH_CPU_WIDE => {
            let pid = c.u32()?;
            let tid = c.u32()?;
            Some(Record::Switch {
                id: sample_id(body),
                out: misc & MISC_SWITCH_OUT != 0,
                other: Some((pid, tid)),
            })
        }
        kind::LOST_SAMPLES => {
            let lost = c.u64()?;
            Some(Record::Lost {
                id: sample_id(body),
                lost,
                off_cpu: false,
            })
        }
        _ => None,
    }
}

/// Decodes a contiguous run of records (as copied out of a ring buffer).
/// Unknown record types are skipped; a header whose size is impossible ends
/// decoding, since nothing after it can be located reliably.
pub fn parse_records(bytes: &[u8], layout: Layout) -> Vec<Record> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + 8 <= bytes.len() {
        let kind = u32::from_ne_bytes([bytes[pos], bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]]);
        let misc = u16::from_ne_bytes([bytes[pos + 4], bytes[pos + 5]]);
        let size = usize::from(u16::from_ne_bytes([bytes[pos + 6], bytes[pos + 7]]));
        if size < 8 || pos + size > bytes.len() {
            break;
        }
        if let Some(record) = parse_one(kind, misc, &bytes[pos + 8..pos + size], layout) {
            out.push(record);
        }
        pos += size;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u32, misc: u16, body_len: usize) -> Vec<u8> {
        let mut v = kind.to_ne_bytes().to_vec();
        v.extend_from_slice(&misc.to_ne_bytes());
        v.extend_from_slice(&((body_len + 8) as u16).to_ne_bytes());
        v
    }

    fn trailer(pid: u32, tid: u32, time: u64) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&pid.to_ne_bytes());
        v.extend_from_slice(&tid.to_ne_bytes());
        v.extend_from_slice(&time.to_ne_bytes());
        v.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        v
    }

    #[test]
    fn cpu_wide_switch_names_the_task_on_the_other_side() {
        let mut body = Vec::new();
        body.extend_from_slice(&0u32.to_ne_bytes());
        body.extend_from_slice(&0u32.to_ne_bytes());
        body.extend(trailer(41, 42, 99));
        let mut bytes = header(kind::SWITCH_CPU_WIDE, 0, body.len());
        bytes.extend(body);
        // A per-task record (no pid/tid before the sample id) switching out.
        let task = trailer(41, 42, 100);
        bytes.extend(header(kind::SWITCH, MISC_SWITCH_OUT, task.len()));
        bytes.extend(task);
        let id = |time| SampleId {
            pid: 41,
            tid: 42,
            time,
            cpu: 1,
        };
        assert_eq!(
            parse_records(&bytes, Layout::default()),
            vec![
                Record::Switch {
                    id: id(99),
                    out: false,
                    other: Some((0, 0)),
                },
                Record::Switch {
                    id: id(100),
                    out: true,
                    other: None,
                },
            ]
        );
    }

    #[test]
    fn comm_exec_record_round_trips() {
        let mut body = Vec::new();
        body.extend_from_slice(&7u32.to_ne_bytes());
        body.extend_from_slice(&8u32.to_ne_bytes());
        body.extend_from_slice(b"worker\0\0");
        body.extend(trailer(7, 8, 1234));
        let mut bytes = header(3, MISC_COMM_EXEC, body.len());
        bytes.extend(body);
        let recs = parse_records(&bytes, Layout::default());
        assert_eq!(
            recs,
            vec![Record::Comm {
                id: SampleId {
                    pid: 7,
                    tid: 8,
                    time: 1234,
                    cpu: 1
                },
                pid: 7,
                tid: 8,
                comm: "worker".into(),
                exec: true
            }]
        );
    }

    #[test]
    fn truncated_and_oversized_records_are_not_trusted() {
        // A sample claiming a callchain longer than the record.
        let mut body = vec![0u8; 40];
        body.extend_from_slice(&u64::MAX.to_ne_bytes());
        let mut bytes = header(9, 0, body.len());
        bytes.extend(body);
        assert!(parse_records(&bytes, Layout::default()).is_empty());
        // A header claiming more bytes than exist.
        let bytes = header(9, 0, 400);
        assert!(parse_records(&bytes, Layout::default()).is_empty());
        // Zero size would loop forever if accepted.
        let mut bytes = 9u32.to_ne_bytes().to_vec();
        bytes.extend_from_slice(&[0, 0, 0, 0]);
        assert!(parse_records(&bytes, Layout::default()).is_empty());
    }
}
