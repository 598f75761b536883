//! The runtime schema: what the generated table in `schema.rs` is made of.
//!
//! A [`Message`] lists its fields in the order of the `.proto` file (which is
//! the order of the Go struct, hence the order in which the API server writes
//! JSON keys). Message-typed fields point at other messages by their index in
//! [`MESSAGES`](super::schema::MESSAGES).

/// A protobuf message of the Kubernetes schema.
#[derive(Debug)]
pub(crate) struct Message {
    /// Full protobuf name, e.g. `k8s.io.api.core.v1.Pod`.
    pub name: &'static str,
    /// How the message maps to JSON when it is not a plain JSON object.
    pub special: Special,
    /// The message is a kind (or a list of a kind): its JSON carries the
    /// `kind` and `apiVersion` of the Go `TypeMeta`, which protobuf does not.
    pub type_meta: bool,
    /// Fields in `.proto` declaration order.
    pub fields: &'static [Field],
}

/// One field of a [`Message`].
#[derive(Debug)]
pub(crate) struct Field {
    /// The JSON key (Kubernetes proto field names are their JSON names).
    pub json: &'static str,
    /// The protobuf field number.
    pub tag: u32,
    /// The scalar or message type; for maps, the type of the values (keys are strings).
    pub kind: Kind,
    /// Cardinality, and whether Go writes the JSON key even when the value is empty.
    pub label: Label,
}

/// The protobuf type of a field (or of a map's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Bool,
    I32,
    I64,
    F64,
    Str,
    Bytes,
    /// A message, by index into `MESSAGES`.
    Msg(u16),
}

/// Cardinality of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Label {
    /// `optional`, and marked `+optional` in the API.
    Opt,
    /// `optional` on the wire, but not marked `+optional` in the API: an
    /// empty raw JSON value (`RawExtension`, `FieldsV1`) is written as `null`
    /// rather than left out, as Go writes a non-pointer one.
    Req,
    /// `repeated`: a JSON array.
    Rep,
    /// `map<string, kind>`: a JSON object.
    Map,
    /// A message embedded in Go with `json:",inline"`: its fields are keys of
    /// the enclosing JSON object (Volume's `volumeSource`, Probe's `handler`).
    Inline,
}

/// Messages whose JSON form is not an object of their fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    /// A plain message: a JSON object of its fields.
    None,
    /// `meta.v1.Time` {seconds=1, nanos=2}: RFC 3339 string, seconds precision.
    Time,
    /// `meta.v1.MicroTime` {seconds=1, nanos=2}: RFC 3339 string, 6 fractional digits.
    MicroTime,
    /// `meta.v1.Duration` {duration=1 (ns)}: a Go duration string (`1h2m3s`).
    Duration,
    /// `resource.Quantity` {string=1}: a JSON string.
    Quantity,
    /// `intstr.IntOrString` {type=1, intVal=2, strVal=3}: a JSON number or string.
    IntOrString,
    /// `runtime.RawExtension`, `meta.v1.FieldsV1` {raw=1}: embedded raw JSON.
    RawJson,
    /// `meta.v1.Verbs`, `*.ExtraValue` {repeated string items=1}: a JSON array of strings.
    StringList,
}

/// Constructor used by the generated table (keeps it one line per field).
pub(crate) const fn f(json: &'static str, tag: u32, kind: Kind, label: Label) -> Field {
    Field {
        json,
        tag,
        kind,
        label,
    }
}

/// Constructor used by the generated table.
pub(crate) const fn m(
    name: &'static str,
    special: Special,
    type_meta: bool,
    fields: &'static [Field],
) -> Message {
    Message {
        name,
        special,
        type_meta,
        fields,
    }
}

impl Message {
    /// The position (in `fields`) of the field with this tag.
    #[inline]
    pub fn field_pos_by_tag(&self, tag: u32) -> Option<usize> {
        self.fields.iter().position(|f| f.tag == tag)
    }
}
