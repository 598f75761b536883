//! An object's JSON as a lean sim keeps it ([`SimConfig::lean`]): an LZ4
//! block compressed against a dictionary of sample pods' JSON, unpacked
//! each time it is served. Most of a pod (its managedFields, the shape of
//! its spec and status, image names) is in the dictionary: its 6.7 KB of
//! JSON pack into about 1.5 KB (3.1 KB without a dictionary).
//!
//! [`SimConfig::lean`]: super::SimConfig::lean

use std::sync::Arc;

use bytes::Bytes;

/// How far back an LZ4 match reaches: a dictionary's useful length.
const WINDOW: usize = 64 * 1024;

/// The bytes packed JSON is compressed against: sample objects' JSON.
#[derive(Debug)]
pub struct Dictionary(Box<[u8]>);

impl Dictionary {
    /// A dictionary of `samples` (JSON), taken until it holds 64 KiB.
    pub fn new(samples: impl IntoIterator<Item = Bytes>) -> Arc<Self> {
        let mut bytes = Vec::with_capacity(WINDOW);
        for sample in samples {
            if bytes.len() >= WINDOW {
                break;
            }
            bytes.extend_from_slice(&sample);
        }
        let start = bytes.len().saturating_sub(WINDOW);
        Arc::new(Dictionary(bytes[start..].into()))
    }
}

/// JSON packed against a [`Dictionary`].
#[derive(Debug, Clone)]
pub struct Packed {
    block: Box<[u8]>,
    len: usize,
    dictionary: Arc<Dictionary>,
}

impl Packed {
    /// Packs `json`.
    pub fn new(json: &[u8], dictionary: &Arc<Dictionary>) -> Self {
        Packed {
            block: lz4_flex::block::compress_with_dict(json, &dictionary.0).into(),
            len: json.len(),
            dictionary: dictionary.clone(),
        }
    }

    /// The JSON it was packed from.
    pub fn unpack(&self) -> Bytes {
        lz4_flex::block::decompress_with_dict(&self.block, self.len, &self.dictionary.0)
            .expect("a block this module packed unpacks")
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_unpacks_as_it_was_and_packs_smaller_against_a_dictionary_of_its_kind() {
        let object = |i: u32| {
            Bytes::from(format!(
                r#"{{"metadata":{{"name":"web-{i}","labels":{{"app":"web"}}}},"spec":{{"containers":[{{"name":"app","image":"registry.example.com/web:{i}"}}]}}}}"#
            ))
        };
        let dictionary = Dictionary::new((0..1000).map(object));
        assert_eq!(dictionary.0.len(), WINDOW);
        let empty = Dictionary::new([]);
        for i in [1, 77, 123_456] {
            let json = object(i);
            let packed = Packed::new(&json, &dictionary);
            assert_eq!(packed.unpack(), json);
            let alone = Packed::new(&json, &empty);
            assert_eq!(alone.unpack(), json);
            assert!(packed.block.len() < alone.block.len() / 2, "{i}");
        }
    }
}
