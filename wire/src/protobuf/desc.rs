//! The runtime schema: what the generated table in `schema.rs` is made of.
//!
//! A [`Message`] lists its fields in the order of the Go struct (which is
//! the order of the `.proto` file, and the order in which the API server
//! writes JSON keys); `by_tag` gives the order of field numbers, in which Go
//! writes protobuf. Each field says how Go holds it ([`Go`]), which decides
//! what Go's `encoding/json` and protobuf marshalling write when it is zero.
//! Message-typed fields point at other messages by their index in
//! [`MESSAGES`](super::schema::MESSAGES).

use super::version::KubeVersion;

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
    /// Fields in Go struct order (the JSON key order).
    pub fields: &'static [Field],
    /// Positions in `fields` by ascending field number (Go's protobuf
    /// order); empty when that is `fields`' own order.
    pub by_tag: &'static [u8],
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
    /// Cardinality.
    pub label: Label,
    /// How the Go struct holds the field.
    pub go: Go,
    /// `(apiVersion, kind)` that the API server sets on the Go `TypeMeta` of
    /// this (repeated) field's objects although protobuf cannot carry it
    /// (a StatefulSet's `volumeClaimTemplates`).
    pub type_meta: Option<(&'static str, &'static str)>,
    /// How older Kubernetes minors had the field.
    pub history: History,
}

/// How Kubernetes minors older than the schema's had a field (a line of
/// `kubernetes/history.tsv`; see [`KubeVersion`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct History {
    /// The first minor with the field; 0 when every minor the history
    /// covers has it.
    pub since: u8,
    /// `(minor, go)`: before `minor`, Go held the field as `go`.
    pub held: Option<(u8, Go)>,
}

impl History {
    /// A field every covered minor has, held as now.
    pub const ALWAYS: History = History {
        since: 0,
        held: None,
    };
}

impl Field {
    /// Whether the Go types of `version` have the field.
    #[inline]
    pub fn in_version(&self, version: KubeVersion) -> bool {
        version.minor() >= self.history.since
    }

    /// How the Go struct of `version` holds the field.
    #[inline]
    pub fn go_in(&self, version: KubeVersion) -> Go {
        match self.history.held {
            Some((until, go)) if version.minor() < until => go,
            _ => self.go,
        }
    }
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
    /// `optional`: one value.
    One,
    /// `repeated`: a JSON array.
    Rep,
    /// `map<string, kind>`: a JSON object.
    Map,
    /// A struct embedded in Go with `json:",inline"`: its fields are keys of
    /// the enclosing JSON object (Volume's `volumeSource`, Probe's `handler`).
    Inline,
}

/// How a Go struct holds a field: what `encoding/json` and Go's protobuf
/// marshalling do with its zero value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Go {
    /// A value (`string`, `int32`, `bool`, a struct): always in Go's
    /// protobuf; in JSON unless `omitempty` and zero (`""`, `0`, `false`;
    /// a struct is never empty).
    Value,
    /// A value tagged `omitempty`.
    ValueOmitEmpty,
    /// A pointer, slice or map: in protobuf only when non-nil; `null` in
    /// JSON when nil.
    Nil,
    /// A pointer, slice or map tagged `omitempty`: left out of JSON when nil
    /// (and a slice or map when empty).
    NilOmitEmpty,
}

impl Go {
    pub fn omitempty(self) -> bool {
        matches!(self, Go::ValueOmitEmpty | Go::NilOmitEmpty)
    }

    pub fn nullable(self) -> bool {
        matches!(self, Go::Nil | Go::NilOmitEmpty)
    }
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
pub(crate) const fn f(json: &'static str, tag: u32, kind: Kind, label: Label, go: Go) -> Field {
    Field {
        json,
        tag,
        kind,
        label,
        go,
        type_meta: None,
        history: History::ALWAYS,
    }
}

/// [`f`] for a field whose objects the API server gives a `TypeMeta`.
pub(crate) const fn ft(
    json: &'static str,
    tag: u32,
    kind: Kind,
    label: Label,
    go: Go,
    type_meta: (&'static str, &'static str),
) -> Field {
    Field {
        json,
        tag,
        kind,
        label,
        go,
        type_meta: Some(type_meta),
        history: History::ALWAYS,
    }
}

/// [`f`] for a field older minors lack (`since`) or held otherwise (`held`).
pub(crate) const fn fh(
    json: &'static str,
    tag: u32,
    kind: Kind,
    label: Label,
    go: Go,
    since: u8,
    held: Option<(u8, Go)>,
) -> Field {
    Field {
        json,
        tag,
        kind,
        label,
        go,
        type_meta: None,
        history: History { since, held },
    }
}

/// Constructor used by the generated table.
pub(crate) const fn m(
    name: &'static str,
    special: Special,
    type_meta: bool,
    fields: &'static [Field],
    by_tag: &'static [u8],
) -> Message {
    Message {
        name,
        special,
        type_meta,
        fields,
        by_tag,
    }
}

impl Message {
    /// The position (in `fields`) of the field with this tag.
    #[inline]
    pub fn field_pos_by_tag(&self, tag: u32) -> Option<usize> {
        self.fields.iter().position(|f| f.tag == tag)
    }

    /// Field positions in ascending field number order.
    pub fn tag_order(&self) -> impl Iterator<Item = usize> + '_ {
        let own = self.by_tag.is_empty().then_some(0..self.fields.len());
        let listed = self.by_tag.iter().map(|&p| usize::from(p));
        own.into_iter().flatten().chain(listed)
    }
}
