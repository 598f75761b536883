//! [`ProtoError`]: every way transcoding or framing can fail.

/// Why a JSON or protobuf document could not be transcoded, or a frame read.
///
/// `path` names the field in JSON terms, e.g. `spec.containers[1].ports[0].containerPort`
/// or `metadata.labels["app"]`; it is empty for the top-level object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// The JSON is not well-formed, or a value has the wrong JSON type.
    #[error("invalid JSON at `{path}`: {message}")]
    Json {
        /// Where the parser stopped.
        path: String,
        /// serde_json's description (with line and column).
        message: String,
    },
    /// A JSON key that the schema of the message does not have.
    #[error("unknown field `{path}` (not in {message})")]
    UnknownField {
        /// The offending key, with its parents.
        path: String,
        /// Full protobuf name of the message that lacks it.
        message: &'static str,
    },
    /// A value of the right JSON type that cannot be represented (a bad
    /// timestamp, an int32 out of range, bad base64, non-JSON raw bytes).
    #[error("invalid value at `{path}`: {reason}")]
    InvalidValue {
        /// The field.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Bytes that are not a valid protobuf encoding of the expected message.
    #[error("malformed protobuf at `{path}`: {reason}")]
    Malformed {
        /// The field being read (its parent, for a broken key).
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A protobuf field number the schema of the message does not have (a
    /// newer server's field, or the wrong message type).
    #[error("unknown protobuf field {tag} at `{path}` (not in {message})")]
    UnknownTag {
        /// The message holding the field.
        path: String,
        /// The field number.
        tag: u32,
        /// Full protobuf name of the message.
        message: &'static str,
    },
    /// The body does not start with the `k8s\0` magic.
    #[error("protobuf body does not start with the `k8s\\0` magic")]
    MissingMagic,
    /// A watch frame announced a length above the decoder's limit.
    #[error("watch frame of {len} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge {
        /// The announced length.
        len: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The watch stream ended in the middle of a frame.
    #[error("watch stream ended inside a frame ({buffered} bytes buffered, {needed} needed)")]
    TruncatedFrame {
        /// Bytes received of the incomplete frame (with its length prefix).
        buffered: usize,
        /// Bytes needed to complete it (4 while the length prefix itself is incomplete).
        needed: usize,
    },
}

/// One step of a JSON path, prepended while an error unwinds.
pub(crate) enum Seg<'a> {
    Field(&'a str),
    Index(usize),
    Key(&'a str),
}

impl ProtoError {
    fn path_mut(&mut self) -> Option<&mut String> {
        match self {
            ProtoError::Json { path, .. }
            | ProtoError::UnknownField { path, .. }
            | ProtoError::InvalidValue { path, .. }
            | ProtoError::Malformed { path, .. }
            | ProtoError::UnknownTag { path, .. } => Some(path),
            ProtoError::MissingMagic
            | ProtoError::FrameTooLarge { .. }
            | ProtoError::TruncatedFrame { .. } => None,
        }
    }

    /// Prepends one path step (called by each level as the error unwinds).
    pub(crate) fn within(mut self, seg: Seg<'_>) -> Self {
        if let Some(path) = self.path_mut() {
            let rest = std::mem::take(path);
            let sep = if rest.is_empty() || rest.starts_with('[') {
                ""
            } else {
                "."
            };
            *path = match seg {
                Seg::Field(name) => format!("{name}{sep}{rest}"),
                Seg::Index(i) => format!("[{i}]{sep}{rest}"),
                Seg::Key(key) => format!("[{key:?}]{sep}{rest}"),
            };
        }
        self
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        ProtoError::InvalidValue {
            path: String::new(),
            reason: reason.into(),
        }
    }

    pub(crate) fn malformed(reason: impl std::fmt::Display) -> Self {
        ProtoError::Malformed {
            path: String::new(),
            reason: reason.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_like_json_paths() {
        let e = ProtoError::invalid("bad")
            .within(Seg::Field("containerPort"))
            .within(Seg::Index(0))
            .within(Seg::Field("ports"))
            .within(Seg::Index(1))
            .within(Seg::Field("containers"))
            .within(Seg::Field("spec"));
        assert_eq!(
            e.to_string(),
            "invalid value at `spec.containers[1].ports[0].containerPort`: bad"
        );
        let e = ProtoError::invalid("bad")
            .within(Seg::Key("app"))
            .within(Seg::Field("labels"));
        assert_eq!(e.to_string(), "invalid value at `labels[\"app\"]`: bad");
    }
}
