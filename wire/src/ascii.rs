//! Splitting the short strings of a request (its path, its query, a
//! header's list) at an ASCII byte.

/// `s` split at each `separator`, an ASCII byte, as `str::split` splits it,
/// found by the `memchr` crate's search: for the short pieces of a request
/// line `str::split` with a `char` costs several times as much (it sets up
/// the standard library's `memchr` for each piece).
pub fn split(s: &str, separator: u8) -> impl Iterator<Item = &str> + Clone {
    debug_assert!(separator.is_ascii());
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let piece = rest?;
        // An ASCII byte is a whole character: the slices are on boundaries.
        match memchr::memchr(separator, piece.as_bytes()) {
            Some(at) => {
                rest = Some(&piece[at + 1..]);
                Some(&piece[..at])
            }
            None => {
                rest = None;
                Some(piece)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_splits_as_str_split_does() {
        for s in [
            "",
            "/",
            "//",
            "/api/v1/namespaces/a/pods/p",
            "a",
            "a/",
            "/a",
            "é/ü//ß/",
            "resourceVersion=0&watch=1&&",
        ] {
            for separator in [b'/', b'&'] {
                assert_eq!(
                    split(s, separator).collect::<Vec<_>>(),
                    s.split(char::from(separator)).collect::<Vec<_>>(),
                    "{s:?} at {separator}"
                );
            }
        }
    }
}
