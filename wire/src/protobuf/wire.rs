//! Protobuf wire format: varints, keys, length prefixes, and a bounds-checked
//! reader. Nothing here panics on hostile input.

/// Wire type of varint scalars (bool, int32, int64).
pub(crate) const VARINT: u8 = 0;
/// Wire type of `double`.
pub(crate) const FIXED64: u8 = 1;
/// Wire type of strings, bytes, messages and packed repeated scalars.
pub(crate) const LEN: u8 = 2;
/// Wire type of `float` (not used by Kubernetes, but skipped correctly).
pub(crate) const FIXED32: u8 = 5;

#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub(crate) fn varint_len(v: u64) -> usize {
    // 1 byte per started group of 7 bits, at least 1.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
pub(crate) fn put_key(out: &mut Vec<u8>, tag: u32, wire_type: u8) {
    put_varint(out, (u64::from(tag) << 3) | u64::from(wire_type));
}

/// Writes a length-delimited field whose content is already known.
#[inline]
pub(crate) fn put_bytes_field(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    put_key(out, tag, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Size of a length-delimited field with a `len`-byte content and tag < 16.
#[inline]
pub(crate) fn bytes_field_len(tag: u32, len: usize) -> usize {
    varint_len(u64::from(tag) << 3) + varint_len(len as u64) + len
}

/// Opens a length-delimited field whose length is not known yet: writes the
/// key and a 1-byte placeholder, returns where the content starts.
#[inline]
pub(crate) fn begin_len(out: &mut Vec<u8>, tag: u32) -> usize {
    put_key(out, tag, LEN);
    out.push(0);
    out.len()
}

/// Closes a field opened by [`begin_len`]: writes the length, moving the
/// content when it needs more than one length byte.
#[inline]
pub(crate) fn end_len(out: &mut Vec<u8>, start: usize) {
    let len = out.len() - start;
    if len < 0x80 {
        out[start - 1] = len as u8;
        return;
    }
    let extra = varint_len(len as u64) - 1;
    out.resize(out.len() + extra, 0);
    out.copy_within(start..start + len, start + extra);
    let mut v = len as u64;
    let mut at = start - 1;
    while v >= 0x80 {
        out[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    out[at] = v as u8;
}

/// What went wrong while reading the wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireError {
    Truncated,
    VarintOverflow,
    BadWireType(u8),
    ZeroTag,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Truncated => f.write_str("truncated message"),
            WireError::VarintOverflow => f.write_str("varint longer than 10 bytes"),
            WireError::BadWireType(t) => write!(f, "invalid wire type {t}"),
            WireError::ZeroTag => f.write_str("field number 0"),
        }
    }
}

/// A value as it appears on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireValue<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(&'a [u8]),
}

impl WireValue<'_> {
    pub(crate) fn wire_type(&self) -> u8 {
        match self {
            WireValue::Varint(_) => VARINT,
            WireValue::Fixed64(_) => FIXED64,
            WireValue::Fixed32(_) => FIXED32,
            WireValue::Len(_) => LEN,
        }
    }
}

/// Reads a varint from the front of `data`.
#[inline]
pub(crate) fn read_varint(data: &mut &[u8]) -> Result<u64, WireError> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let Some((&b, rest)) = data.split_first() else {
            return Err(WireError::Truncated);
        };
        *data = rest;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(WireError::VarintOverflow)
}

/// Iterates the fields of one message: `(tag, value)`.
pub(crate) struct Fields<'a> {
    data: &'a [u8],
}

impl<'a> Fields<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Fields { data }
    }

    fn read(&mut self) -> Result<(u32, WireValue<'a>), WireError> {
        let key = read_varint(&mut self.data)?;
        let tag = u32::try_from(key >> 3).map_err(|_| WireError::VarintOverflow)?;
        if tag == 0 {
            return Err(WireError::ZeroTag);
        }
        let value = match (key & 7) as u8 {
            VARINT => WireValue::Varint(read_varint(&mut self.data)?),
            FIXED64 => {
                let (b, rest) = self
                    .data
                    .split_first_chunk::<8>()
                    .ok_or(WireError::Truncated)?;
                self.data = rest;
                WireValue::Fixed64(u64::from_le_bytes(*b))
            }
            LEN => {
                let len = read_varint(&mut self.data)?;
                let len = usize::try_from(len).map_err(|_| WireError::Truncated)?;
                if len > self.data.len() {
                    return Err(WireError::Truncated);
                }
                let (b, rest) = self.data.split_at(len);
                self.data = rest;
                WireValue::Len(b)
            }
            FIXED32 => {
                let (b, rest) = self
                    .data
                    .split_first_chunk::<4>()
                    .ok_or(WireError::Truncated)?;
                self.data = rest;
                WireValue::Fixed32(u32::from_le_bytes(*b))
            }
            other => return Err(WireError::BadWireType(other)),
        };
        Ok((tag, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, WireValue<'a>), WireError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.data.is_empty() {
            return None;
        }
        let item = self.read();
        if item.is_err() {
            // Stop after the first error.
            self.data = &[];
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_len_matches_encoding() {
        for v in [0u64, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "{v}");
            assert_eq!(read_varint(&mut out.as_slice()), Ok(v));
        }
    }

    #[test]
    fn end_len_moves_long_content() {
        for len in [0usize, 1, 127, 128, 300, 20_000] {
            let mut out = vec![0xAA];
            let start = begin_len(&mut out, 3);
            out.extend(std::iter::repeat_n(7u8, len));
            end_len(&mut out, start);
            let mut fields = Fields::new(&out[1..]);
            let (tag, value) = fields.next().unwrap().unwrap();
            assert_eq!(tag, 3);
            assert_eq!(value, WireValue::Len(&vec![7u8; len][..]));
            assert!(fields.next().is_none());
        }
    }
}
