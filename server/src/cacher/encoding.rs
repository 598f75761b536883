//! The encodings objects are served in: JSON or protobuf ([`Encoding`]), whole
//! or metadata only ([`Shape`]), one object at a time. List bodies are
//! built from these in `http::bodies`, watch frames in
//! [`fanout::frame`](super::fanout::frame).
//!
//! Every encoding of an object is made once per object version and kept
//! beside it (see [`kubecache_wire::Encodings`]).

use bytes::Bytes;
use kubecache_wire::protobuf::{self, MessageType, ProtoError};
use kubecache_wire::{CachedObject, Encoding, METADATA_API_VERSION, Status};

/// What an answer carries of each object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The whole object.
    Object,
    /// `meta.k8s.io/v1` `PartialObjectMetadata`: its metadata only.
    Metadata,
}

/// What encoding needs of a resource.
#[derive(Clone, Debug)]
pub struct Kind {
    /// e.g. `apps/v1`.
    pub api_version: String,
    /// e.g. `Deployment`.
    pub kind: String,
    /// List items leave out `kind` and `apiVersion` (built-in kinds).
    pub builtin: bool,
    /// Its protobuf message; `None` for kinds without one (custom
    /// resources, kinds the schema does not cover).
    pub protobuf: Option<MessageType>,
}

impl Kind {
    /// `apiVersion` and `kind` of one object in `shape`.
    pub fn type_meta(&self, shape: Shape) -> (&str, &str) {
        match shape {
            Shape::Object => (&self.api_version, &self.kind),
            Shape::Metadata => (METADATA_API_VERSION, "PartialObjectMetadata"),
        }
    }

    /// `apiVersion` and `kind` of a list in `shape`.
    pub fn list_type_meta(&self, shape: Shape) -> (String, String) {
        match shape {
            Shape::Object => (self.api_version.clone(), format!("{}List", self.kind)),
            Shape::Metadata => (
                METADATA_API_VERSION.into(),
                "PartialObjectMetadataList".into(),
            ),
        }
    }

    /// The protobuf message of `object` in `shape` (no envelope).
    ///
    /// # Errors
    ///
    /// 500 for an object that does not encode (a field the schema does not
    /// know: an API server newer than kubecache's schema), or a kind without
    /// protobuf asked for whole.
    pub fn message(&self, object: &CachedObject, shape: Shape) -> Result<Bytes, Status> {
        let encoded = match (shape, self.protobuf) {
            (Shape::Metadata, _) => object.metadata_protobuf(),
            (Shape::Object, Some(ty)) => object.protobuf(ty),
            (Shape::Object, None) => {
                return Err(Status::internal(format!(
                    "{} has no protobuf encoding",
                    self.kind
                )));
            }
        };
        encoded.map_err(|e: ProtoError| {
            Status::internal(format!(
                "kubecache cannot encode {} as protobuf: {e}",
                object.key
            ))
        })
    }

    /// `object` in JSON with `kind` and `apiVersion`, as pieces to write
    /// one after the other (kept encodings: nothing is copied).
    pub fn json(&self, object: &CachedObject, shape: Shape) -> [Bytes; 3] {
        match shape {
            Shape::Object => [object.json.clone(), Bytes::new(), Bytes::new()],
            Shape::Metadata => object.metadata_json(self.builtin),
        }
    }

    /// `object` as a whole body (a get's, or a watch event's object): JSON
    /// with `kind` and `apiVersion`, or `k8s\0` + `runtime.Unknown`.
    ///
    /// # Errors
    ///
    /// See [`message`](Self::message).
    pub fn body(
        &self,
        object: &CachedObject,
        shape: Shape,
        encoding: Encoding,
    ) -> Result<Vec<u8>, Status> {
        Ok(match encoding {
            Encoding::Json => self.json(object, shape).concat(),
            Encoding::Protobuf => {
                let (api_version, kind) = self.type_meta(shape);
                protobuf::encode_unknown(api_version, kind, &self.message(object, shape)?)
            }
        })
    }
}
