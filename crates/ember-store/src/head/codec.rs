//! The columnar encoding of a head, as blocks store it: [`TenantHead::encode`] and
//! [`TenantHead::merge_encoded`] with their varint and column helpers.

use super::*;

use crate::encoding::{Reader, gcd, put_signed, put_str, put_varint};

impl TenantHead {
    /// Columnar encoding of the whole head: string table; mapping, function and location
    /// tables as one column per field; stack-tree parent and location columns; then per
    /// series its labels, period, a delta-encoded time column, and per profile its sorted
    /// node ids (delta varints), the gcd of its values and the values divided by it (CPU
    /// values are multiples of the period, so this turns 4-byte varints into 1-byte ones).
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.strings.len() as u64);
        for s in &self.strings {
            put_str(out, s);
        }
        let m = &self.mappings.items;
        put_varint(out, m.len() as u64);
        m.iter().for_each(|m| put_varint(out, m.start));
        m.iter().for_each(|m| put_varint(out, m.limit));
        m.iter().for_each(|m| put_varint(out, m.offset));
        m.iter().for_each(|m| put_varint(out, m.filename.into()));
        m.iter().for_each(|m| put_varint(out, m.build_id.into()));
        m.iter().for_each(|m| put_varint(out, m.flags.into()));
        let f = &self.functions.items;
        put_varint(out, f.len() as u64);
        f.iter().for_each(|f| put_varint(out, f.name.into()));
        f.iter().for_each(|f| put_varint(out, f.system_name.into()));
        f.iter().for_each(|f| put_varint(out, f.filename.into()));
        f.iter().for_each(|f| put_signed(out, f.start_line));
        let l = &self.locations.items;
        put_varint(out, l.len() as u64);
        l.iter().for_each(|l| put_varint(out, l.mapping.into()));
        let mut prev = 0u64;
        for loc in l {
            put_signed(out, loc.address.wrapping_sub(prev) as i64);
            prev = loc.address;
        }
        l.iter()
            .for_each(|l| put_varint(out, (l.lines.len() as u64) << 1 | u64::from(l.is_folded)));
        l.iter()
            .flat_map(|l| l.lines.iter())
            .for_each(|(f, _)| put_varint(out, (*f).into()));
        l.iter()
            .flat_map(|l| l.lines.iter())
            .for_each(|(_, n)| put_signed(out, *n));
        put_varint(out, self.nodes.len() as u64);
        for (parent, _) in &self.nodes {
            put_varint(out, u64::from(*parent));
        }
        for (_, loc) in &self.nodes {
            put_varint(out, u64::from(*loc));
        }
        put_varint(out, self.series.len() as u64);
        for s in &self.series {
            put_varint(out, s.labels.len() as u64);
            for (n, v) in &s.labels {
                put_str(out, n);
                put_str(out, v);
            }
            put_signed(out, s.period);
            put_varint(out, s.profiles.len() as u64);
            let mut prev = 0i64;
            for p in &s.profiles {
                put_signed(out, p.time_nanos.wrapping_sub(prev));
                prev = p.time_nanos;
            }
            for p in &s.profiles {
                put_varint(out, p.nodes.len() as u64);
                let mut last = 0u32;
                for n in &p.nodes {
                    put_varint(out, u64::from(n.wrapping_sub(last)));
                    last = *n;
                }
                let g = p.values.iter().fold(0u64, |g, v| gcd(g, v.unsigned_abs()));
                // Only i64::MIN alone gives a gcd past i64::MAX; 1 keeps that exact too.
                let g = i64::try_from(g).unwrap_or(1).max(1);
                put_varint(out, g as u64);
                for v in &p.values {
                    // Exact: g divides every value.
                    put_signed(out, v / g);
                }
            }
        }
    }

    /// Adds everything of an [`TenantHead::encode`]d head to this one (symbols re-interned).
    /// Returns `None` on malformed input (nothing partial is visible to callers' invariants:
    /// profiles are inserted only after their series decoded completely).
    pub fn merge_encoded(&mut self, bytes: &[u8]) -> Option<()> {
        let mut r = Reader::new(bytes);
        let n_strings = r.count()?;
        let mut string_map = Vec::with_capacity(n_strings);
        for _ in 0..n_strings {
            let s = r.str()?;
            string_map.push(self.intern(s));
        }
        let sid = |id: u64| -> Option<u32> { string_map.get(usize::try_from(id).ok()?).copied() };

        let n = r.count()?;
        let start = r.column(n, Reader::varint)?;
        let limit = r.column(n, Reader::varint)?;
        let offset = r.column(n, Reader::varint)?;
        let filename = r.column(n, Reader::varint)?;
        let build_id = r.column(n, Reader::varint)?;
        let flags = r.column(n, Reader::varint)?;
        let mut mapping_map = Vec::with_capacity(n);
        for i in 0..n {
            mapping_map.push(self.mapping(MappingSym {
                start: start[i],
                limit: limit[i],
                offset: offset[i],
                filename: sid(filename[i])?,
                build_id: sid(build_id[i])?,
                flags: u8::try_from(flags[i]).ok()?,
            }));
        }

        let n = r.count()?;
        let name = r.column(n, Reader::varint)?;
        let system_name = r.column(n, Reader::varint)?;
        let filename = r.column(n, Reader::varint)?;
        let start_line = r.column(n, Reader::signed)?;
        let mut function_map = Vec::with_capacity(n);
        for i in 0..n {
            function_map.push(self.function(FunctionSym {
                name: sid(name[i])?,
                system_name: sid(system_name[i])?,
                filename: sid(filename[i])?,
                start_line: start_line[i],
            }));
        }

        let n = r.count()?;
        let mapping = r.column(n, Reader::u32)?;
        let mut prev = 0u64;
        let address = r.column(n, |r| {
            prev = prev.wrapping_add(r.signed()? as u64);
            Some(prev)
        })?;
        let line_counts = r.column(n, Reader::varint)?;
        let total_lines = line_counts
            .iter()
            .try_fold(0usize, |a, c| a.checked_add(usize::try_from(c >> 1).ok()?))?;
        if total_lines > bytes.len() {
            return None;
        }
        let line_fns = r.column(total_lines, Reader::u32)?;
        let line_nos = r.column(total_lines, Reader::signed)?;
        let mut location_map = Vec::with_capacity(n);
        let mut at = 0usize;
        for i in 0..n {
            let k = (line_counts[i] >> 1) as usize;
            let mut lines = Vec::with_capacity(k);
            for j in at..at + k {
                lines.push((*function_map.get(line_fns[j] as usize)?, line_nos[j]));
            }
            at += k;
            let m = match mapping[i] {
                0 => 0,
                m => *mapping_map.get(m as usize - 1)? + 1,
            };
            location_map.push(self.location(LocationSym {
                mapping: m,
                address: address[i],
                lines: lines.into_boxed_slice(),
                is_folded: line_counts[i] & 1 == 1,
            }));
        }

        let n_nodes = r.count()?;
        let parents = r.column(n_nodes, Reader::varint)?;
        let mut node_map: Vec<u32> = Vec::with_capacity(n_nodes);
        for (i, &parent) in parents.iter().enumerate() {
            let loc = r.varint()?;
            if i == 0 {
                node_map.push(0);
                continue;
            }
            let parent = *node_map.get(usize::try_from(parent).ok()?)?;
            let loc = *location_map.get(usize::try_from(loc).ok()?)?;
            node_map.push(self.child(parent, loc));
        }
        let n_series = r.count()?;
        for _ in 0..n_series {
            let n_labels = r.count()?;
            let mut labels = Labels::with_capacity(n_labels);
            for _ in 0..n_labels {
                let n = r.str()?.to_string();
                let v = r.str()?.to_string();
                labels.push((n, v));
            }
            let period = r.signed()?;
            let n_profiles = r.count()?;
            let mut times = Vec::with_capacity(n_profiles);
            let mut prev = 0i64;
            for _ in 0..n_profiles {
                prev = prev.wrapping_add(r.signed()?);
                times.push(prev);
            }
            let mut profiles = Vec::with_capacity(n_profiles);
            for time_nanos in times {
                let n = r.count()?;
                let mut nodes = Vec::with_capacity(n);
                let mut last = 0u32;
                for _ in 0..n {
                    last = last.wrapping_add(r.u32()?);
                    nodes.push(*node_map.get(last as usize)?);
                }
                let g = i64::try_from(r.varint()?).ok()?;
                let mut pairs = Vec::with_capacity(n);
                for node in nodes {
                    pairs.push((node, r.signed()?.saturating_mul(g)));
                }
                // Remapped ids lose the block's order; sorted ids keep the deltas small.
                pairs.sort_unstable();
                profiles.push(StoredProfile {
                    time_nanos,
                    nodes: pairs.iter().map(|p| p.0).collect(),
                    values: pairs.iter().map(|p| p.1).collect(),
                });
            }
            for p in profiles {
                self.insert_with_period(labels.clone(), p, period);
            }
        }
        r.at_end().then_some(())
    }
}
