//! The `push.v1` wire types (shared with clients in `ember-push`) and the
//! protobuf-JSON helpers the Connect JSON codec needs.

pub use ember_push::proto::*;

/// Decodes standard or URL-safe base64, padded or not (protobuf JSON `bytes` fields).
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            b'\r' | b'\n' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_variants() {
        assert_eq!(super::base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(super::base64_decode("aGVsbG8").unwrap(), b"hello");
        assert_eq!(super::base64_decode("-_8").unwrap(), vec![0xfb, 0xff]);
        assert!(super::base64_decode("a b").is_none());
    }
}
