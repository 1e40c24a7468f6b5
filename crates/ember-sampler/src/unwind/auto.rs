//! `--call-graph auto`: per binary, frame pointers where they work and CFI where they do not.
//!
//! The decision is taken per binary from the samples whose user instruction is in it; the
//! walk of one stack then follows it frame by frame: the kernel's frame-pointer walk is kept
//! while it stays in binaries that keep frame pointers, and CFI takes over from the first
//! frame in one that does not. Without that, a program built with frame pointers lost every
//! frame below the first library without them: glibc's `__libc_start_call_main` (built
//! without frame pointers on most distributions) ends the kernel's walk, so `main`'s callers
//! `__libc_start_main` and `_start` were never seen.

use super::{AUTO_DECISION_SAMPLES, AUTO_FP_AGREEMENT, Auto, DwarfUnwinder, UnwoundFrame, hex};
use super::{AutoChoice, Method, read_u64};
use crate::arch;
use crate::process::Process;

impl DwarfUnwinder {
    /// `--call-graph auto` for one sample: the frame-pointer walk `fp` (from
    /// the kernel) or CFI, by the rule of the binary the sampled user
    /// instruction is in. The first [`AUTO_DECISION_SAMPLES`] samples of a
    /// binary compute both, use whichever got further, and count whether
    /// the frame-pointer walk found exactly CFI's frames for the run of
    /// frames inside that binary; frame pointers are kept for the binary
    /// when they matched in at least 80% of them, CFI otherwise. A binary
    /// without CFI uses frame pointers at once; an address outside any
    /// binary (JIT) is decided per sample.
    ///
    /// Where frame pointers are used, the walk switches to CFI at the first
    /// frame in a binary that has not been found to keep frame pointers (see
    /// the module documentation), so the stack still reaches its root.
    pub fn unwind_auto(
        &mut self,
        pid: u32,
        process: &Process,
        regs: &[u64],
        stack: &[u8],
        fp: Vec<UnwoundFrame>,
    ) -> Vec<UnwoundFrame> {
        let leaf = arch::start_regs(regs).map(|r| r.pc);
        let map = leaf.and_then(|pc| process.find(pc));
        self.refresh_process(pid, process);
        let id = leaf.and_then(|pc| self.processes.get(&pid)?.binary_at(pc).cloned());
        let state = id
            .as_ref()
            .and_then(|id| self.binaries.get_mut(id))
            .map(|c| {
                c.samples += 1;
                c.auto
            });
        match state {
            Some(Auto::Decided(Method::FramePointer)) => {
                let walked = self.fp_then_cfi(pid, regs, stack, fp);
                if walked.len() > 1 {
                    return walked;
                }
                // The walk ended at the leaf: the sample is in a prologue or epilogue, where
                // even a binary that keeps frame pointers has not (or no longer) set up its
                // own, so the frame pointer register is the caller's. CFI knows those
                // instructions; it costs a full unwind only for these few samples.
                let cfi = self.unwind(pid, process, regs, stack);
                if cfi.len() > walked.len() {
                    cfi
                } else {
                    walked
                }
            }
            Some(Auto::Decided(Method::Cfi)) => self.unwind(pid, process, regs, stack),
            other => {
                let cfi = self.unwind(pid, process, regs, stack);
                if let (Some(Auto::Deciding { seen, fp_agreed }), Some(id), Some(map)) =
                    (other, id, map)
                {
                    let inside = |frames: &[UnwoundFrame]| -> Vec<u64> {
                        frames
                            .iter()
                            .take_while(|(addr, _)| {
                                process.find(*addr).is_some_and(|m| m.path == map.path)
                            })
                            .map(|&(addr, _)| addr)
                            .collect()
                    };
                    let agreed = !cfi.is_empty() && inside(&fp) == inside(&cfi);
                    let (seen, fp_agreed) = (seen + 1, fp_agreed + u32::from(agreed));
                    if let Some(entry) = self.binaries.get_mut(&id) {
                        entry.auto = if seen >= AUTO_DECISION_SAMPLES {
                            let fp_ok = f64::from(fp_agreed) >= AUTO_FP_AGREEMENT * f64::from(seen);
                            entry.reason =
                                format!("frame pointers matched CFI in {fp_agreed}/{seen} samples");
                            Auto::Decided(if fp_ok {
                                Method::FramePointer
                            } else {
                                Method::Cfi
                            })
                        } else {
                            Auto::Deciding { seen, fp_agreed }
                        };
                    }
                }
                let fp = self.fp_then_cfi(pid, regs, stack, fp);
                if fp.len() > cfi.len() { fp } else { cfi }
            }
        }
    }

    /// The kernel's frame-pointer walk `fp`, continued by CFI from its first frame (after the
    /// leaf) in a binary whose frame pointers are not trusted.
    ///
    /// CFI needs the registers of the frame it starts from, which the kernel does not report:
    /// the same walk is replayed over the stack copy (`regs`, `stack`), checking each return
    /// address against the kernel's, up to that frame. Where the replay cannot follow (the
    /// copy is shorter than the kernel's walk, or they disagree) the kernel's walk is kept
    /// as it is.
    pub(super) fn fp_then_cfi(
        &mut self,
        pid: u32,
        regs: &[u64],
        stack: &[u8],
        mut fp: Vec<UnwoundFrame>,
    ) -> Vec<UnwoundFrame> {
        let Some(start) = arch::start_regs(regs) else {
            return fp;
        };
        if fp.first().map(|f| f.0) != Some(start.pc) {
            return fp;
        }
        let (mut pc, mut sp, mut bp) = (start.pc, start.sp, start.fp);
        for i in 0..fp.len() {
            if i > 0 && !self.frame_pointers_trusted(pid, pc) {
                let Some(address) = framehop::FrameAddress::from_return_address(pc) else {
                    return fp;
                };
                fp.truncate(i + 1);
                let regs = arch::regs_at_return(pc, sp, bp);
                self.cfi_from(pid, address, regs, start.sp, stack, &mut fp);
                return fp;
            }
            let Some(&(next, _)) = fp.get(i + 1) else {
                break;
            };
            let Some(step) = arch::frame_pointer_step(bp, |addr| read_u64(stack, start.sp, addr))
            else {
                return fp;
            };
            if step.ret != next {
                return fp;
            }
            (pc, sp, bp) = (step.ret, step.sp, step.fp);
        }
        fp
    }

    /// True when the kernel's frame-pointer walk can be trusted through the function at `pc`
    /// of `pid`: its binary was decided to keep frame pointers (or has no CFI to do better
    /// with), or it is in no binary at all (JIT code, where the kernel's walk is all there
    /// is).
    fn frame_pointers_trusted(&self, pid: u32, pc: u64) -> bool {
        let Some(id) = self.processes.get(&pid).and_then(|p| p.binary_at(pc)) else {
            return true;
        };
        self.binaries
            .get(id)
            .is_some_and(|c| c.auto == Auto::Decided(Method::FramePointer))
    }

    /// The decisions `auto` has taken so far, by binary (sorted by path).
    pub fn auto_choices(&self) -> Vec<AutoChoice> {
        let mut out: Vec<AutoChoice> = self
            .binaries
            .values()
            .filter(|c| c.samples > 0)
            .filter_map(|c| match c.auto {
                Auto::Decided(method) => Some(AutoChoice {
                    path: c.path.clone(),
                    build_id: c.build_id.as_deref().map(hex).unwrap_or_default(),
                    method,
                    reason: c.reason.clone(),
                }),
                Auto::Deciding { .. } => None,
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }
}
