//! Ember's wire protocols: the prost types of Pyroscope's `push.v1`, `querier.v1` and
//! `types.v1` APIs, one set shared by every client and server in the workspace.
//!
//! Owns the message definitions only (hand-written prost derives with the field numbers of
//! Pyroscope's public `push.proto`, `querier.proto` and `types.proto`, so building needs no
//! `protoc`), plus [`base64_decode`], the one piece of the protobuf JSON mapping that both
//! Connect JSON codecs need. It must not hold transport, validation or storage logic: the
//! push client (`ember-push`), the server (`ember-server`) and the store's write-ahead log
//! record (`ember-store`) build on these types.
//!
//! One type per message: there is exactly one [`types::LabelPair`].

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

pub mod push;
pub mod querier;
pub mod types;

/// Decodes standard or URL-safe base64, padded or not: how the protobuf JSON mapping
/// writes `bytes` fields (Connect JSON bodies). `None` on a character outside both
/// alphabets.
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
    use prost::Message;

    #[test]
    fn base64_variants() {
        assert_eq!(super::base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(super::base64_decode("aGVsbG8").unwrap(), b"hello");
        assert_eq!(super::base64_decode("-_8").unwrap(), vec![0xfb, 0xff]);
        assert!(super::base64_decode("a b").is_none());
    }

    #[test]
    fn push_request_round_trips_with_pyroscope_field_numbers() {
        let request = crate::push::PushRequest {
            series: vec![crate::push::RawProfileSeries {
                labels: vec![crate::types::LabelPair {
                    name: "service_name".into(),
                    value: "a".into(),
                }],
                samples: vec![crate::push::RawSample {
                    raw_profile: vec![1, 2, 3],
                    id: "x".into(),
                }],
            }],
        };
        let bytes = request.encode_to_vec();
        // series (field 1, length-delimited) → labels (field 1) → name (field 1) "service_name".
        assert_eq!(&bytes[..2], &[0x0a, (bytes.len() - 2) as u8]);
        assert_eq!(
            crate::push::PushRequest::decode(&bytes[..]).unwrap(),
            request
        );
    }
}
