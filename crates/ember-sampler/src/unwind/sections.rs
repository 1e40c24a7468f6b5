//! The unwind sections of one binary (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`), where
//! its segments lie, and the framehop module of one of its executable mappings.
//!
//! Binaries on disk are read in place through a mapping of the file (unwinding reads the few
//! pages it needs straight from the page cache instead of copying whole sections: a big
//! shared library has megabytes of `.eh_frame`); the kernel's vDSO, which has no file, is
//! copied once from this process's own memory (every 64-bit process on the host maps the
//! same image).

use framehop::{ExplicitModuleSectionInfo, Module};
use object::{Object, ObjectSection, ObjectSegment};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use ember_samples::mmap::Mmap;

/// A section of a binary, as framehop reads it.
#[derive(Clone)]
pub(super) struct Data {
    backing: Arc<Mmap>,
    range: Range<usize>,
}

impl std::ops::Deref for Data {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.backing
            .bytes()
            .get(self.range.clone())
            .unwrap_or_default()
    }
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Data({:?})", self.range)
    }
}

/// One PT_LOAD segment: where it lies in the file and in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    offset: u64,
    file_size: u64,
    vaddr: u64,
    executable: bool,
}

/// Unwind-relevant sections of one binary.
#[derive(Debug, Default)]
pub(super) struct Sections {
    segments: Vec<Segment>,
    text_svma: Option<Range<u64>>,
    eh_frame: Option<(Range<u64>, Data)>,
    eh_frame_hdr: Option<(Range<u64>, Data)>,
    got: Option<Range<u64>>,
    debug_frame: Option<Data>,
}

impl Sections {
    /// Loads the unwind sections of the file at `path` (already resolved)
    /// and its build-id.
    pub(super) fn load(path: &Path) -> Option<(Sections, Option<Vec<u8>>)> {
        Self::parse(Arc::new(Mmap::open(path).ok()?))
    }

    /// The unwind sections of the kernel's vDSO and its build-id, from the copy mapped into
    /// this process (`[vdso]` in `/proc/self/maps`). Without them a sample inside
    /// `clock_gettime` or `gettimeofday` (a hot path of many programs) ends at the vDSO:
    /// it has CFI but no file to read it from.
    pub(super) fn load_vdso() -> Option<(Sections, Option<Vec<u8>>)> {
        Self::parse(Arc::new(ember_samples::symbolize::vdso_image()?))
    }

    fn parse(backing: Arc<Mmap>) -> Option<(Sections, Option<Vec<u8>>)> {
        let file = object::File::parse(backing.bytes()).ok()?;
        let build_id = file
            .build_id()
            .ok()
            .flatten()
            .filter(|id| !id.is_empty())
            .map(<[u8]>::to_vec);
        let len = backing.bytes().len();
        let section = |name: &str| -> Option<(Range<u64>, Data)> {
            let s = file.section_by_name(name)?;
            // Compressed sections (some .debug_frame) cannot be used in place.
            let range = s.compressed_file_range().ok()?;
            if range.format != object::CompressionFormat::None {
                return None;
            }
            let start = usize::try_from(range.offset).ok()?;
            let end = start.checked_add(usize::try_from(range.compressed_size).ok()?)?;
            if end > len {
                return None;
            }
            let data = Data {
                backing: backing.clone(),
                range: start..end,
            };
            Some((s.address()..s.address() + s.size(), data))
        };
        // .text is left out on purpose: it can be huge and CFI alone
        // describes prologues and epilogues of compiler-generated code.
        let text_svma = file
            .section_by_name(".text")
            .map(|s| s.address()..s.address() + s.size());
        let mut out = Sections {
            text_svma,
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            got: section(".got").map(|(r, _)| r),
            debug_frame: section(".debug_frame").map(|(_, d)| d),
            ..Default::default()
        };
        for seg in file.segments() {
            let (offset, file_size) = seg.file_range();
            let executable = match seg.flags() {
                object::SegmentFlags::Elf { p_flags, .. } => p_flags.0 & object::elf::PF_X.0 != 0,
                _ => false,
            };
            out.segments.push(Segment {
                offset,
                file_size,
                vaddr: seg.address(),
                executable,
            });
        }
        Some((out, build_id))
    }

    /// Bytes of unwind data this entry keeps mapped (what its pages can
    /// add to RSS once touched).
    pub(super) fn mapped_bytes(&self) -> u64 {
        let len = |d: &Data| d.range.len() as u64;
        self.eh_frame.as_ref().map_or(0, |(_, d)| len(d))
            + self.eh_frame_hdr.as_ref().map_or(0, |(_, d)| len(d))
            + self.debug_frame.as_ref().map_or(0, len)
    }

    pub(super) fn has_cfi(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    /// The load bias (`avma - svma`) of the executable mapping `avma` of file
    /// bytes from `pgoff`: from the executable segment that mapping holds.
    ///
    /// The mapping's first page alone does not say which segment it is:
    /// linkers that pack segments without page-aligning them in the file
    /// (lld, the Rust toolchain's default, and `-z noseparate-code`) put the
    /// end of the read-only segment and the start of the code in one page,
    /// at virtual addresses a page apart. Taking the first segment holding
    /// `pgoff` gave the read-only segment's bias, off by a page, and every
    /// CFI lookup in that binary then read another function's rules.
    fn bias(&self, avma: &Range<u64>, pgoff: u64) -> Option<u64> {
        let file_end = pgoff.checked_add(avma.end.checked_sub(avma.start)?)?;
        let overlaps = |s: &&Segment| s.offset < file_end && pgoff < s.offset + s.file_size.max(1);
        let seg = self
            .segments
            .iter()
            .filter(overlaps)
            .find(|s| s.executable)
            .or_else(|| self.segments.iter().find(overlaps))?;
        // avma of file offset o: avma.start + (o - pgoff); svma: vaddr + (o - offset).
        avma.start
            .checked_add(seg.offset)?
            .checked_sub(pgoff)?
            .checked_sub(seg.vaddr)
    }

    /// The framehop module of the mapping `avma` of this binary (file bytes from `pgoff`).
    pub(super) fn module(&self, name: &str, avma: Range<u64>, pgoff: u64) -> Option<Module<Data>> {
        let base_avma = self.bias(&avma, pgoff)?;
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text_svma.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|(r, _)| r.clone()),
            eh_frame: self.eh_frame.as_ref().map(|(_, d)| d.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|(_, d)| d.clone()),
            debug_frame: self.debug_frame.clone(),
            text: None,
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            text_segment_svma: None,
            text_segment: None,
        };
        Some(Module::new(name.to_string(), avma, base_avma, info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(offset: u64, file_size: u64, vaddr: u64, executable: bool) -> Segment {
        Segment {
            offset,
            file_size,
            vaddr,
            executable,
        }
    }

    #[test]
    fn bias_comes_from_the_code_segment_sharing_a_page_with_read_only_data() {
        // `readelf -l` of a `rustc -O` binary (lld): the code starts in the file page where
        // the read-only data ends, one page further in memory.
        let s = Sections {
            segments: vec![
                seg(0, 0x13a24, 0, false),
                seg(0x13a30, 0x3e480, 0x14a30, true),
                seg(0x51eb0, 0x2908, 0x53eb0, false),
            ],
            ..Default::default()
        };
        let start = 0x5555_5556_8000;
        // The kernel maps file page 0x13000 for the code at 0x14000 + bias.
        let bias = s.bias(&(start..start + 0x3f000), 0x13000).unwrap();
        assert_eq!(start - bias, 0x14000);
        // A classic gcc/ld layout (page-aligned segments) is unchanged.
        let s = Sections {
            segments: vec![seg(0, 0x628, 0, false), seg(0x1000, 0x1b5, 0x1000, true)],
            ..Default::default()
        };
        assert_eq!(
            s.bias(&(start..start + 0x1000), 0x1000),
            Some(start - 0x1000)
        );
        // A mapping no segment holds has no bias.
        assert_eq!(s.bias(&(start..start + 0x1000), 0x9000), None);
    }

    #[test]
    fn the_vdso_has_unwind_tables_and_a_build_id() {
        let (sections, build_id) = Sections::load_vdso().expect("this process has a vDSO");
        assert!(sections.has_cfi(), "the vDSO carries .eh_frame");
        assert!(build_id.is_some_and(|b| !b.is_empty()));
        assert!(sections.segments.iter().any(|s| s.executable));
    }
}
