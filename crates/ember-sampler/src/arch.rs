//! Everything that differs between CPU architectures, in one place: which
//! user registers the kernel copies with each sample (`perf_regs` bits), how
//! they map to the stack pointer / frame pointer / return address registers
//! the CFI unwinder starts from, and which framehop unwinder runs the CFI.
//!
//! Supporting another architecture means adding a module here that defines
//! the same items as [`x86_64`] and a `cfg(target_arch)` line selecting it;
//! the rest of the sampler is architecture-neutral. x86_64 is implemented
//! and tested end to end; [`aarch64`] (framehop's aarch64 unwinder,
//! X29/LR/SP/PC) is compiled and unit-tested on every host but has not been
//! run on aarch64 hardware.

/// The registers an unwind starts from, decoded from a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartRegs {
    /// Program counter of the sampled instruction.
    pub pc: u64,
    /// Stack pointer (the user stack copy starts here).
    pub sp: u64,
    /// Frame pointer.
    pub fp: u64,
    /// Link register (return address register); 0 where the return
    /// address lives on the stack (x86_64).
    pub lr: u64,
}

/// One step of a frame-pointer walk: the caller's return address, frame pointer and stack
/// pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FpStep {
    /// The return address into the caller.
    pub ret: u64,
    /// The caller's frame pointer.
    pub fp: u64,
    /// The caller's stack pointer once the callee has returned.
    pub sp: u64,
}

impl FpStep {
    /// The step from the two-word frame record at `fp` (the caller's frame pointer, then the
    /// return address), with the caller's stack pointer just above the record: the layout
    /// both x86_64 and aarch64 prologues leave.
    fn from_record(fp: u64, mut read: impl FnMut(u64) -> Option<u64>) -> Option<FpStep> {
        Some(FpStep {
            ret: read(fp.checked_add(8)?)?,
            fp: read(fp)?,
            sp: fp.checked_add(16)?,
        })
    }
}

/// x86_64. Compiled on every host (framehop is portable) so that it is
/// type-checked and unit-tested everywhere; selected by `target_arch`.
#[allow(dead_code)]
pub mod x86_64 {
    use super::StartRegs;
    use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};

    /// `perf_regs` bits for BP (6), SP (7) and IP (8). The kernel writes the
    /// requested registers in bit order.
    pub const USER_REGS_MASK: u64 = (1 << 6) | (1 << 7) | (1 << 8);

    /// CFI unwinding is implemented for this architecture.
    pub const CFI_SUPPORTED: bool = true;

    /// framehop's unwinder for this architecture.
    pub type Unwinder<D> = UnwinderX86_64<D>;
    /// framehop's rule cache for this architecture.
    pub type Cache = CacheX86_64;
    /// framehop's register set for this architecture.
    pub type UnwindRegs = UnwindRegsX86_64;

    /// Decodes the registers of a sample (in `USER_REGS_MASK` bit order).
    pub fn start_regs(regs: &[u64]) -> Option<StartRegs> {
        let &[bp, sp, ip] = regs else {
            return None;
        };
        Some(StartRegs {
            pc: ip,
            sp,
            fp: bp,
            lr: 0,
        })
    }

    /// framehop's register set from decoded registers.
    pub fn unwind_regs(r: &StartRegs) -> UnwindRegs {
        UnwindRegsX86_64::new(r.pc, r.sp, r.fp)
    }

    /// framehop's register set of a caller's frame found by a frame-pointer walk.
    pub fn regs_at_return(pc: u64, sp: u64, fp: u64) -> UnwindRegs {
        UnwindRegsX86_64::new(pc, sp, fp)
    }

    /// One step of the frame-pointer walk: `push rbp; mov rbp, rsp` leaves the caller's
    /// RBP at `[RBP]` and the return address above it; the caller's stack pointer is just
    /// past that return address.
    pub fn frame_pointer_step(
        fp: u64,
        read: impl FnMut(u64) -> Option<u64>,
    ) -> Option<super::FpStep> {
        super::FpStep::from_record(fp, read)
    }
}

/// aarch64, compiled and unit-tested on every host like [`x86_64`].
#[allow(dead_code)]
pub mod aarch64 {
    use super::StartRegs;
    use framehop::aarch64::{CacheAarch64, UnwindRegsAarch64, UnwinderAarch64};

    /// `perf_regs` bits for X29 (frame pointer), LR (30), SP (31) and PC (32).
    pub const USER_REGS_MASK: u64 = (1 << 29) | (1 << 30) | (1 << 31) | (1 << 32);

    /// CFI unwinding is implemented for this architecture (untested here).
    pub const CFI_SUPPORTED: bool = true;

    /// framehop's unwinder for this architecture.
    pub type Unwinder<D> = UnwinderAarch64<D>;
    /// framehop's rule cache for this architecture.
    pub type Cache = CacheAarch64;
    /// framehop's register set for this architecture.
    pub type UnwindRegs = UnwindRegsAarch64;

    /// Decodes the registers of a sample (in `USER_REGS_MASK` bit order).
    pub fn start_regs(regs: &[u64]) -> Option<StartRegs> {
        let &[fp, lr, sp, pc] = regs else {
            return None;
        };
        Some(StartRegs { pc, sp, fp, lr })
    }

    /// framehop's register set from decoded registers.
    pub fn unwind_regs(r: &StartRegs) -> UnwindRegs {
        UnwindRegsAarch64::new(r.lr, r.sp, r.fp)
    }

    /// framehop's register set of a caller's frame found by a frame-pointer walk (its LR
    /// is not known there; CFI of a non-leaf frame reads it from the stack).
    pub fn regs_at_return(pc: u64, sp: u64, fp: u64) -> UnwindRegs {
        UnwindRegsAarch64::new(pc, sp, fp)
    }

    /// One step of the frame-pointer walk: the frame record at X29 holds the caller's X29
    /// and the return address; the caller's stack pointer is taken as just above the
    /// record (where AAPCS64 prologues put it).
    pub fn frame_pointer_step(
        fp: u64,
        read: impl FnMut(u64) -> Option<u64>,
    ) -> Option<super::FpStep> {
        super::FpStep::from_record(fp, read)
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod imp {
    use super::StartRegs;
    use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};

    /// No user registers are requested on other architectures.
    pub const USER_REGS_MASK: u64 = 0;

    /// Only frame-pointer unwinding (by the kernel) is available.
    pub const CFI_SUPPORTED: bool = false;

    /// Placeholder so the crate builds; never used (no registers).
    pub type Unwinder<D> = UnwinderX86_64<D>;
    /// Placeholder rule cache.
    pub type Cache = CacheX86_64;
    /// Placeholder register set.
    pub type UnwindRegs = UnwindRegsX86_64;

    /// No registers are sampled: nothing to decode.
    pub fn start_regs(_regs: &[u64]) -> Option<StartRegs> {
        None
    }

    /// Unreachable in practice: `start_regs` never returns registers.
    pub fn unwind_regs(r: &StartRegs) -> UnwindRegs {
        UnwindRegsX86_64::new(r.pc, r.sp, r.fp)
    }

    /// Unreachable in practice, like [`unwind_regs`].
    pub fn regs_at_return(pc: u64, sp: u64, fp: u64) -> UnwindRegs {
        UnwindRegsX86_64::new(pc, sp, fp)
    }

    /// No frame-pointer walk in user space on other architectures.
    pub fn frame_pointer_step(
        _fp: u64,
        _read: impl FnMut(u64) -> Option<u64>,
    ) -> Option<super::FpStep> {
        None
    }
}

#[cfg(target_arch = "x86_64")]
use x86_64 as imp;

#[cfg(target_arch = "aarch64")]
use aarch64 as imp;

pub use imp::{
    CFI_SUPPORTED, Cache, USER_REGS_MASK, UnwindRegs, Unwinder, frame_pointer_step, regs_at_return,
    start_regs, unwind_regs,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_architectures_decode_registers_in_mask_bit_order() {
        // perf writes registers in ascending bit order.
        let r = x86_64::start_regs(&[0xb, 0x5, 0x1]).unwrap(); // bp, sp, ip
        assert_eq!((r.pc, r.sp, r.fp, r.lr), (0x1, 0x5, 0xb, 0));
        assert_eq!(x86_64::USER_REGS_MASK.count_ones(), 3);
        let r = aarch64::start_regs(&[0xf, 0x1e, 0x5, 0x1]).unwrap(); // x29, lr, sp, pc
        assert_eq!((r.pc, r.sp, r.fp, r.lr), (0x1, 0x5, 0xf, 0x1e));
        assert_eq!(aarch64::USER_REGS_MASK.count_ones(), 4);
        assert!(aarch64::start_regs(&[1, 2, 3]).is_none());
    }

    #[test]
    fn register_mask_and_decoding_agree() {
        let n = USER_REGS_MASK.count_ones() as usize;
        let regs: Vec<u64> = (1..=n as u64).map(|i| i * 0x1000).collect();
        if CFI_SUPPORTED {
            let r = start_regs(&regs).expect("as many registers as the mask has bits");
            assert!([r.pc, r.sp, r.fp].iter().all(|&v| v != 0));
            assert!(start_regs(&regs[..n - 1]).is_none());
        }
    }
}
