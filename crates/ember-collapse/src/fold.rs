//! The per-line state machine that folds `perf script` samples into stack counts.
//!
//! A [`Folder`] sees one line at a time. Its state only survives inside a sample: a blank line
//! resets everything except the event-type filter, which is why the driver may hand
//! blank-line-delimited chunks to different threads, each with its own `Folder`, and still get
//! exactly the result of a single sequential pass (see `stream.rs`).

use crate::fxhash::hash_bytes;
use crate::lines::{event_line_parts, is_space, stack_line_parts};
use crate::table::Sink;
use crate::tidy;
use crate::{CollapseOptions, WarningKind};

/// Finished stacks collected before they are added to the sink together (see `Folder::flush`).
const PENDING_STACKS: usize = 64;

/// Bytes of pending stacks that also trigger a flush: huge stacks (hostile or very deep input)
/// are then added one by one instead of piling up 64 at a time.
const PENDING_BYTES: usize = 64 << 10;

/// Bytes of input validated as UTF-8 at a time (then parsed while still in the L1 cache).
const VALIDATION_WINDOW: usize = 8 << 10;

/// Whether stack lines of the current sample are kept.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StackFilter {
    Keep,
    /// The sample's event type is filtered out.
    Skip,
    /// A `--skip-after` frame was reached: drop the frames above it and the process name.
    SkipRemaining,
}

/// First occurrence and number of one kind of malformed line, with unit-relative line numbers.
#[derive(Clone, Debug)]
pub(crate) struct LocalWarning {
    pub(crate) kind: WarningKind,
    pub(crate) count: u64,
    pub(crate) first_line: u64,
    pub(crate) first_text: String,
}

/// Folds lines into a [`Sink`]. One per thread; buffers are reused across samples so the
/// steady state allocates only when a never-seen stack is inserted.
pub(crate) struct Folder<'o> {
    options: &'o CollapseOptions,
    include_pid: bool,
    /// The event type to keep; `None` until the first event line names one.
    pub(crate) event_filter: Option<String>,
    in_event: bool,
    stack_filter: StackFilter,
    period: Option<u64>,
    pname: String,
    /// Bytes of all frames of the current sample, in the order they were pushed (leaf first).
    frames: Vec<u8>,
    /// `(start, end)` of each frame in `frames`, leaf first.
    frame_ranges: Vec<(usize, usize)>,
    /// Finished stacks not yet added to the sink, back to back (see [`PENDING_STACKS`]).
    pending: Vec<u8>,
    /// `(hash, end offset in pending, weight)` of each pending stack.
    pending_stacks: Vec<(u64, usize, u64)>,
    scratch_quotes: String,
    scratch_rust: String,
    scratch_unknown: String,
    /// Lines seen in the current unit (for warning positions).
    pub(crate) lines: u64,
    pub(crate) warnings: Vec<LocalWarning>,
}

impl<'o> Folder<'o> {
    /// A fresh folder; `event_filter` is the user's filter or one already detected.
    pub(crate) fn new(options: &'o CollapseOptions, event_filter: Option<String>) -> Self {
        Folder {
            options,
            include_pid: options.include_pid || options.include_tid,
            event_filter,
            in_event: false,
            stack_filter: StackFilter::Keep,
            period: None,
            pname: String::new(),
            frames: Vec::with_capacity(4096),
            frame_ranges: Vec::with_capacity(128),
            pending: Vec::with_capacity(16 << 10),
            pending_stacks: Vec::with_capacity(PENDING_STACKS),
            scratch_quotes: String::new(),
            scratch_rust: String::new(),
            scratch_unknown: String::new(),
            lines: 0,
            warnings: Vec::new(),
        }
    }

    /// Folds every line of `text`. When `stop_once_filter_known` is set, returns early right
    /// after the first blank line seen once the event filter is known, with the number of
    /// bytes consumed; otherwise returns `text.len()`.
    ///
    /// `text` is expected to end at a sample boundary or at the end of input; a trailing line
    /// without `\n` is processed like any other.
    pub(crate) fn fold(
        &mut self,
        text: &[u8],
        map: &mut impl Sink,
        stop_once_filter_known: bool,
    ) -> usize {
        // Validation runs over windows of a few KiB ending at a line end: the window is still
        // in the L1 cache when its lines are parsed right after, and the common (valid UTF-8)
        // path stays free of per-line checks; invalid windows fall back to lossy decoding.
        let mut pos = 0;
        while pos < text.len() {
            let window_end = match text.get(pos + VALIDATION_WINDOW..) {
                Some(after) => memchr::memchr(b'\n', after)
                    .map_or(text.len(), |i| pos + VALIDATION_WINDOW + i + 1),
                None => text.len(),
            };
            let window = &text[pos..window_end];
            let (stopped, consumed) = match std::str::from_utf8(window) {
                Ok(s) => self.fold_lines(s, map, stop_once_filter_known),
                Err(_) => self.fold_lossy(window, map, stop_once_filter_known),
            };
            pos += consumed;
            if stopped {
                return pos;
            }
        }
        pos
    }

    /// Folds the lines of `s`; returns whether it stopped early and the bytes consumed.
    fn fold_lines(
        &mut self,
        s: &str,
        map: &mut impl Sink,
        stop_once_filter_known: bool,
    ) -> (bool, usize) {
        let bytes = s.as_bytes();
        let mut pos = 0;
        while pos < s.len() {
            let end = memchr::memchr(b'\n', &bytes[pos..]).map_or(s.len(), |i| pos + i);
            let next = (end + 1).min(s.len());
            let blank = self.line(&s[pos..end], map);
            pos = next;
            if blank && stop_once_filter_known && self.event_filter.is_some() {
                return (true, pos);
            }
        }
        (false, pos)
    }

    /// [`Folder::fold_lines`] for bytes that are not valid UTF-8 (decoded lossily per line).
    fn fold_lossy(
        &mut self,
        text: &[u8],
        map: &mut impl Sink,
        stop_once_filter_known: bool,
    ) -> (bool, usize) {
        let mut pos = 0;
        while pos < text.len() {
            let end = memchr::memchr(b'\n', &text[pos..]).map_or(text.len(), |i| pos + i);
            let next = (end + 1).min(text.len());
            let line = String::from_utf8_lossy(&text[pos..end]);
            let blank = self.line(&line, map);
            pos = next;
            if blank && stop_once_filter_known && self.event_filter.is_some() {
                return (true, pos);
            }
        }
        (false, pos)
    }

    /// Handles the end of input: a last sample without a trailing blank line still counts.
    /// Must be called before the sink is read: it also flushes the pending stacks.
    pub(crate) fn finish(&mut self, map: &mut impl Sink) {
        if !self.frame_ranges.is_empty() {
            self.after_event(map);
        }
        self.flush(map);
    }

    /// Adds the pending stacks to the sink.
    ///
    /// Why batches: each addition is a probe of a large table plus a comparison with the stored
    /// key, i.e. a few cache misses. Done right after parsing each sample, those misses are
    /// waited for one at a time; done back to back, the probes are independent of each other
    /// and the CPU overlaps their misses.
    fn flush(&mut self, map: &mut impl Sink) {
        let mut start = 0;
        for &(hash, end, weight) in &self.pending_stacks {
            map.add(hash, &self.pending[start..end], weight);
            start = end;
        }
        self.pending.clear();
        self.pending_stacks.clear();
    }

    /// Processes one line (without its `\n`); returns true when it was a blank line.
    fn line(&mut self, raw: &str, map: &mut impl Sink) -> bool {
        self.lines += 1;
        if raw.starts_with('#') {
            return false;
        }
        let line = tidy::trim_end(raw);
        if line.is_empty() {
            self.after_event(map);
            return true;
        }
        if self.in_event {
            self.on_stack_line(line);
        } else {
            self.on_event_line(line);
            if !self.frame_ranges.is_empty() {
                // The event line carried its (single-frame) stack inline.
                self.after_event(map);
            }
        }
        false
    }

    fn warn(&mut self, kind: WarningKind, text: &str) {
        // Only the first line of each kind is kept, and only an excerpt of it: a hostile
        // input can be one 300 MB line, which must not be echoed back in a warning.
        if let Some(w) = self.warnings.iter_mut().find(|w| w.kind == kind) {
            w.count += 1;
            return;
        }
        self.warnings.push(LocalWarning {
            kind,
            count: 1,
            first_line: self.lines,
            first_text: excerpt(text),
        });
    }

    /// Handles a sample header such as
    /// `java 24636/25607 [000] 4794564.109216:   10101010 cycles:` (optionally followed by a
    /// single inline stack frame).
    fn on_event_line(&mut self, line: &str) {
        self.in_event = true;
        let Some((comm, pid, tid, end)) = event_line_parts(line) else {
            self.warn(WarningKind::WeirdEventLine, line);
            self.in_event = false;
            return;
        };

        // After the TID: "<time or cpu>: [period] <event>:[<modifiers>:] [inline frame]".
        let rest = &line[end..];
        // The `memchr` crate's searches: `str::find` with a char runs a slower generic search
        // (this header parsing was ~8 % of the time before).
        let (event_part, post_event) = match memchr::memchr(b':', rest.as_bytes()) {
            None => (None, None),
            Some(c1) => {
                let after = &rest[c1 + 1..];
                match memchr::memchr(b':', after.as_bytes()) {
                    Some(c2) => (Some(&after[..c2]), Some(&after[c2 + 1..])),
                    None => (Some(after), None),
                }
            }
        };
        if let Some(part) = event_part {
            // "<period> <event>", separated by spaces (perf) or tabs (simpleperf); a short
            // field, so a plain byte loop.
            let last_space = |s: &str| s.bytes().rposition(is_space);
            let (event, period) = match last_space(part) {
                Some(i) => {
                    let before = tidy::trim_end(&part[..i]);
                    let period = match last_space(before) {
                        Some(j) => &before[j + 1..],
                        None => before,
                    };
                    (&part[i + 1..], period.parse::<u64>().ok())
                }
                None => (part, None),
            };
            // A period of 0 counts 1, as in the Perl script (where "0" is false).
            self.period = period.filter(|&p| p != 0);
            match &self.event_filter {
                Some(filter) => {
                    if event != filter {
                        self.stack_filter = StackFilter::Skip;
                        return;
                    }
                }
                // The first event type seen wins: mixing e.g. cycles and instructions would
                // add up incomparable periods.
                None => self.event_filter = Some(event.to_owned()),
            }
        }

        let inline_frame = post_event.and_then(|post| {
            let start = memchr::memchr3(b':', b' ', b'\t', post.as_bytes()).map_or(0, |i| i + 1);
            let frame = tidy::trim(&post[start..]);
            (!frame.is_empty()).then_some(frame)
        });

        self.pname.clear();
        if memchr::memchr(b' ', comm.as_bytes()).is_none() {
            self.pname.push_str(comm);
        } else {
            for c in comm.chars() {
                self.pname.push(if c == ' ' { '_' } else { c });
            }
        }
        if self.options.include_tid {
            self.pname.push('-');
            self.pname.push_str(pid);
            self.pname.push('/');
            self.pname.push_str(tid);
        } else if self.include_pid {
            self.pname.push('-');
            self.pname.push_str(pid);
        }

        if let Some(frame) = inline_frame {
            self.on_stack_line(frame);
            self.in_event = false;
        }
    }

    /// Handles one frame line such as `ffffffff8103ce3b native_safe_halt+0x5 ([kernel.kallsyms])`.
    fn on_stack_line(&mut self, line: &str) {
        if self.stack_filter != StackFilter::Keep {
            return;
        }
        let Some((pc, rawfunc, module)) = stack_line_parts(line) else {
            self.warn(WarningKind::WeirdStackLine, line);
            return;
        };
        let rawfunc = tidy::strip_offset(rawfunc);
        // A parenthesised "symbol" is a process name, not a frame.
        if rawfunc.starts_with('(') {
            return;
        }
        // `[unknown]` (most frames of binaries without symbols) has none of the characters.
        let unknown = rawfunc == "[unknown]";
        let mut hints = if unknown {
            tidy::SymbolScan::NONE
        } else {
            tidy::scan_symbol(rawfunc)
        };
        // The common cases: no quotes to drop, no Java inlining, no Rust symbol to demangle
        // again; a known symbol, or `[unknown]` in a known module. They get the frame the
        // general path below would give, with less bookkeeping.
        if !hints.quotes && !hints.dash && !tidy::has_rust_hash(rawfunc) {
            let handled = if !unknown || (module == "[unknown]" && !self.options.include_addrs) {
                self.push_frame(rawfunc, &hints, module, false);
                true
            } else if module != "[unknown]" && !self.options.include_addrs {
                self.push_module_frame(module)
            } else {
                false
            };
            if handled {
                if !self.options.skip_after.is_empty()
                    && self.options.skip_after.iter().any(|s| s == rawfunc)
                {
                    self.stack_filter = StackFilter::SkipRemaining;
                }
                return;
            }
        }

        // Take the scratch buffers out so the borrowed symbol can outlive `&mut self` calls.
        let mut quotes = std::mem::take(&mut self.scratch_quotes);
        let mut rust = std::mem::take(&mut self.scratch_rust);
        let mut unknown = std::mem::take(&mut self.scratch_unknown);
        {
            // Quotes that perf printed are dropped like stackcollapse-perf.pl does; quotes that
            // re-demangling produces (Rust lifetimes) are kept like inferno does.
            let func = if hints.quotes {
                tidy::strip_quotes(rawfunc, &mut quotes)
            } else {
                rawfunc
            };
            let func: &str = if tidy::redemangle_rust(func, &mut rust) {
                // Demangling may introduce `(`, `;` or `-`: search everything again.
                hints = tidy::SymbolScan::ALL;
                &rust
            } else {
                func
            };

            let first_new = self.frame_ranges.len();
            // Java inlining: "a->b->c" is one physical frame; b and c are inlined into a.
            let mut parts = 0usize;
            let mut remaining = Some(func);
            while let Some(text) = remaining {
                let arrow = if hints.dash {
                    tidy::find_arrow(text)
                } else {
                    None
                };
                let (part, next) = match arrow {
                    Some(i) => (&text[..i], Some(&text[i + 2..])),
                    None => (text, None),
                };
                remaining = next;
                let (part, part_hints) = match self.module_fallback(part, module, pc, &mut unknown)
                {
                    Some(replaced) => (replaced, tidy::SymbolScan::ALL),
                    None => (part, hints),
                };
                self.push_frame(part, &part_hints, module, parts > 0);
                parts += 1;
            }
            // Inlined parts are listed caller first; frames are stored leaf first.
            self.frame_ranges[first_new..].reverse();

            if !self.options.skip_after.is_empty()
                && self.options.skip_after.iter().any(|s| s == func)
            {
                self.stack_filter = StackFilter::SkipRemaining;
            }
        }
        self.scratch_quotes = quotes;
        self.scratch_rust = rust;
        self.scratch_unknown = unknown;
    }

    /// Replaces `[unknown]` by the module's file name (or the address with `--addrs`);
    /// `None` when `func` stays as it is.
    fn module_fallback<'a>(
        &self,
        func: &str,
        module: &str,
        pc: &str,
        buf: &'a mut String,
    ) -> Option<&'a str> {
        if func != "[unknown]" {
            return None;
        }
        let name = if module == "[unknown]" {
            if !self.options.include_addrs {
                return None;
            }
            "unknown"
        } else {
            module.rsplit('/').next().unwrap_or(module)
        };
        buf.clear();
        buf.push('[');
        buf.push_str(name);
        if self.options.include_addrs {
            buf.push_str(" <");
            buf.push_str(pc);
            buf.push_str(">]");
        } else {
            buf.push(']');
        }
        Some(buf)
    }

    /// Pushes the frame `[<module file name>]` that stands for an unknown symbol in `module`
    /// (as [`Folder::module_fallback`] then [`Folder::push_frame`] would), without building
    /// the name first. Returns false, pushing nothing, when the file name contains `(` or
    /// `;`, which tidying could rewrite: the general path handles those.
    fn push_module_frame(&mut self, module: &str) -> bool {
        let name = match memchr::memrchr(b'/', module.as_bytes()) {
            Some(slash) => &module[slash + 1..],
            None => module,
        };
        let hints = tidy::scan_symbol(name);
        if hints.paren || hints.semicolon {
            return false;
        }
        let start = self.frames.len();
        self.frames.push(b'[');
        self.frames.extend_from_slice(name.as_bytes());
        self.frames.push(b']');
        self.annotate_frame(start, module, false);
        true
    }

    /// Tidies `func` into the frame buffer and annotates it.
    fn push_frame(&mut self, func: &str, hints: &tidy::SymbolScan, module: &str, inlined: bool) {
        let start = self.frames.len();
        let java = self.pname.starts_with("java");
        tidy::push_tidy_generic(&mut self.frames, func, hints, java);
        self.annotate_frame(start, module, inlined);
    }

    /// Appends the `_[i]`, `_[k]` or `_[j]` marker the frame starting at `start` needs, and
    /// records the frame.
    fn annotate_frame(&mut self, start: usize, module: &str, inlined: bool) {
        if inlined {
            if !has_marker(&self.frames[start..], b'i') {
                self.frames.extend_from_slice(b"_[i]");
            }
        } else if self.options.annotate_kernel && tidy::is_kernel(module) {
            self.frames.extend_from_slice(b"_[k]");
        } else if self.options.annotate_jit
            && tidy::is_jit(module)
            && !has_marker(&self.frames[start..], b'j')
        {
            self.frames.extend_from_slice(b"_[j]");
        }
        self.frame_ranges.push((start, self.frames.len()));
    }

    /// Ends a sample: counts its stack (root first) and resets the per-sample state.
    fn after_event(&mut self, map: &mut impl Sink) {
        if !self.frame_ranges.is_empty() {
            let key_start = self.pending.len();
            if self.stack_filter != StackFilter::SkipRemaining {
                self.pending.extend_from_slice(self.pname.as_bytes());
                self.pending.push(b';');
            }
            for &(start, end) in self.frame_ranges.iter().rev() {
                self.pending.extend_from_slice(&self.frames[start..end]);
                self.pending.push(b';');
            }
            self.pending.pop();
            let weight = self.period.unwrap_or(1);
            let hash = hash_bytes(&self.pending[key_start..]);
            self.pending_stacks.push((hash, self.pending.len(), weight));
            if self.pending_stacks.len() >= PENDING_STACKS || self.pending.len() >= PENDING_BYTES {
                self.flush(map);
            }
        }
        self.in_event = false;
        self.stack_filter = StackFilter::Keep;
        self.frames.clear();
        self.frame_ranges.clear();
        self.period = None;
    }
}

/// True when `frame` already contains the annotation `_[<tag>]`.
fn has_marker(frame: &[u8], tag: u8) -> bool {
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'_', &frame[from..]) {
        let at = from + i;
        if frame[at..].starts_with(&[b'_', b'[', tag, b']']) {
            return true;
        }
        from = at + 1;
    }
    false
}

/// The longest excerpt of an offending line kept in a warning, in bytes.
const WARNING_EXCERPT_BYTES: usize = 200;

/// `text` cut to at most [`WARNING_EXCERPT_BYTES`] (on a char boundary), marked with `…` when cut.
fn excerpt(text: &str) -> String {
    if text.len() <= WARNING_EXCERPT_BYTES {
        return text.to_owned();
    }
    let mut end = WARNING_EXCERPT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod excerpt_tests {
    use super::excerpt;

    #[test]
    fn long_lines_are_cut_on_a_char_boundary() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(1000);
        let cut = excerpt(&long);
        assert!(cut.len() <= 200 + "…".len());
        assert!(cut.ends_with('…'));
    }
}
