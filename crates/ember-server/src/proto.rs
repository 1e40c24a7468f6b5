//! Hand-written prost messages of Pyroscope's `push.v1` API (field numbers from its public
//! `push.proto` and `types.proto`), so no `protoc` is needed at build time.

/// `push.v1.PushRequest`: a batch of raw pprof profiles with their labels.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PushRequest {
    /// The series pushed.
    #[prost(message, repeated, tag = "1")]
    pub series: Vec<RawProfileSeries>,
}

/// `push.v1.RawProfileSeries`: labels shared by the samples, and the samples.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawProfileSeries {
    /// Series labels (`__name__`, `service_name`, ...).
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<LabelPair>,
    /// Profiles of this series.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<RawSample>,
}

/// `types.v1.LabelPair`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelPair {
    /// Label name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Label value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `push.v1.RawSample`: one pprof profile, gzip'd or raw.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawSample {
    /// The pprof bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub raw_profile: Vec<u8>,
    /// Client-chosen profile id.
    #[prost(string, tag = "2")]
    pub id: String,
}

/// `push.v1.PushResponse` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PushResponse {}

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
