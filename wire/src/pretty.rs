//! Pretty JSON, as kube-apiserver writes it (1.28): when it is asked for
//! ([`asked`]), a JSON body is Go's `json.MarshalIndent(obj, "", "  ")`,
//! which is the compact form re-indented ([`indent`]), with no final
//! newline. Protobuf and watches are not affected. Shared by kubecache and
//! the simulated API server.

/// Whether a request with `query` and `user_agent` is answered pretty
/// (apiserver's `isPrettyPrint`): a non-empty `pretty` (its first value)
/// alone decides, read by Go's `strconv.ParseBool` (anything else than
/// its true words is compact); without one, a User-Agent starting with
/// `curl`, `Wget` or `Mozilla/5.0`, case-sensitively.
pub fn asked(query: &str, user_agent: Option<&str>) -> bool {
    asked_by(
        crate::list_options::first(query, "pretty").as_deref(),
        user_agent,
    )
}

/// [`asked`] of the query's first `pretty`, read.
pub fn asked_by(pretty: Option<&str>, user_agent: Option<&str>) -> bool {
    if let Some(value) = pretty.filter(|value| !value.is_empty()) {
        return matches!(value, "1" | "t" | "T" | "TRUE" | "true" | "True");
    }
    let agent = user_agent.unwrap_or_default();
    ["curl", "Wget", "Mozilla/5.0"]
        .iter()
        .any(|prefix| agent.starts_with(prefix))
}

/// The valid JSON `json` as Go's `json.Indent(dst, json, "", "  ")` writes
/// it: whitespace between tokens dropped, each member and element on its
/// own line, `": "` after keys, `{}` and `[]` when empty, no final newline.
pub fn indent(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() * 2);
    let (mut depth, mut open, mut in_string, mut escaped) = (0usize, false, false, false);
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.resize(out.len() + 2 * depth, b' ');
    };
    for &b in json {
        if in_string {
            out.push(b);
            in_string = escaped || b != b'"';
            escaped = !escaped && b == b'\\';
            continue;
        }
        if b.is_ascii_whitespace() {
            continue;
        }
        // An opened object or array is indented only once it has members.
        if open && b != b'}' && b != b']' {
            open = false;
            depth += 1;
            newline(&mut out, depth);
        }
        match b {
            b'{' | b'[' => {
                open = true;
                out.push(b);
            }
            b'}' | b']' => {
                if !std::mem::take(&mut open) {
                    depth -= 1;
                    newline(&mut out, depth);
                }
                out.push(b);
            }
            b',' => {
                out.push(b);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            _ => {
                in_string = b == b'"';
                out.push(b);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions_body(file: &str) -> Vec<u8> {
        kubecache_testkit::golden::read(&format!("versions/bodies/{file}"))
    }

    #[test]
    fn the_query_decides_when_it_says_anything_else_the_user_agent() {
        let curl = Some("curl/8.5.0");
        assert!(asked("pretty=true", None));
        assert!(asked("pretty=1", None));
        assert!(asked("limit=2&pretty=T", None));
        assert!(asked("pr%65tty=1", None), "a key decoded as the form is");
        assert!(
            !asked("pretty=&pretty=1", None),
            "the first value alone counts"
        );
        assert!(!asked("pretty=false", curl));
        assert!(
            !asked("pretty=yes", curl),
            "what ParseBool refuses is compact"
        );
        assert!(asked("pretty=", curl), "an empty value says nothing");
        assert!(asked("", Some("Wget/1.21")));
        assert!(asked("", Some("Mozilla/5.0 (X11)")));
        assert!(!asked("", Some("Mozilla/4.0 (compatible)")));
        assert!(!asked("", Some("CURL/8.5.0")));
        assert!(!asked("", Some("kubectl/v1.28.15 (linux/amd64)")));
        assert!(!asked("", None));
    }

    #[test]
    fn compact_bodies_indent_to_the_recorded_pretty_ones() {
        for (compact, pretty) in [
            (
                "pretty-pod-e-ua-kubectl.json",
                "pretty-pod-a-pretty-true.json",
            ),
            (
                "pretty-list-e-ua-kubectl.json",
                "pretty-list-a-pretty-true.json",
            ),
            (
                "pretty-404-e-ua-kubectl.json",
                "pretty-404-a-pretty-true.json",
            ),
        ] {
            let indented = indent(&versions_body(compact));
            assert!(indented == versions_body(pretty), "{compact} -> {pretty}");
        }
        let pretty = versions_body("utf8-list-json-pretty.json");
        assert!(indent(&pretty) == pretty, "idempotent, escapes kept");
    }

    #[test]
    fn empty_objects_and_arrays_stay_on_their_line() {
        let json = br#"{"a":{},"b":[],"c":[1,{"d":"x\"y,:{"}]}"#;
        assert_eq!(
            String::from_utf8(indent(json)).unwrap(),
            "{\n  \"a\": {},\n  \"b\": [],\n  \"c\": [\n    1,\n    {\n      \"d\": \"x\\\"y,:{\"\n    }\n  ]\n}"
        );
    }
}
