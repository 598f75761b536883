//! RFC 6902 JSON patch (`add`, `remove`, `replace`, `move`, `copy`, `test`)
//! on RFC 6901 pointers, with the error texts of the library kube-apiserver
//! uses (`gopkg.in/evanphx/json-patch.v4`): a body that is not a list of
//! operations is a 400, an operation that does not apply a 422.

use kubecache_wire::Status;
use serde_json::Value;

use super::unprocessable;

/// At most this many operations in one patch (`maxJSONPatchOperations`).
const MAX_OPERATIONS: usize = 10_000;

/// Applies the patch `body` (the request body, JSON) to `doc`.
pub fn json_patch(doc: &mut Value, body: &[u8]) -> Result<(), Status> {
    let operations: Vec<serde_json::Map<String, Value>> = serde_json::from_slice(body)
        .map_err(|e| Status::bad_request(format!("json: cannot unmarshal patch: {e}")))?;
    if operations.len() > MAX_OPERATIONS {
        return Err(Status::failure(
            413,
            "RequestEntityTooLarge",
            format!(
                "Request entity too large: The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {}",
                operations.len()
            ),
        ));
    }
    let mut patched = doc.clone();
    for operation in &operations {
        apply_one(&mut patched, operation).map_err(unprocessable)?;
    }
    *doc = patched;
    Ok(())
}

fn apply_one(doc: &mut Value, operation: &serde_json::Map<String, Value>) -> Result<(), String> {
    let field = |name: &str| operation.get(name).and_then(Value::as_str);
    let op = field("op").unwrap_or_default();
    let path = field("path").ok_or_else(|| format!("{op} operation missing path"))?;
    let value = || {
        operation
            .get("value")
            .cloned()
            .ok_or_else(|| format!("{op} operation missing value"))
    };
    let from = || field("from").ok_or_else(|| format!("{op} operation missing from"));
    let failed = |e: String| format!("error in {op} for path: '{path}': {e}");
    match op {
        "add" => add(doc, path, value()?).map_err(failed),
        "remove" => remove(doc, path).map(drop).map_err(failed),
        "replace" => {
            let value = value()?;
            let target = get_mut(doc, path).ok_or_else(|| {
                failed(format!(
                    "replace operation does not apply: doc is missing key: {path}: missing value"
                ))
            })?;
            *target = value;
            Ok(())
        }
        "move" => {
            let from = from()?;
            if path.starts_with(&format!("{from}/")) {
                return Err(failed(format!(
                    "move from {from} into its own child {path}"
                )));
            }
            let moved = remove(doc, from).map_err(failed)?;
            add(doc, path, moved).map_err(failed)
        }
        "copy" => {
            let from = from()?;
            let copied = get_mut(doc, from)
                .map(|v| v.clone())
                .ok_or_else(|| failed(format!("copy from {from}: missing value")))?;
            add(doc, path, copied).map_err(failed)
        }
        "test" => {
            let expected = value()?;
            match get_mut(doc, path) {
                Some(actual) if *actual == expected => Ok(()),
                _ => Err(format!("testing value {path} failed: test failed")),
            }
        }
        other => Err(format!("Unexpected kind: {other}")),
    }
}

/// The reference tokens of a pointer, unescaped (`~1` is `/`, `~0` is `~`).
fn tokens(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| format!("invalid JSON pointer {path:?}"))?;
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

/// The value a pointer names, if it exists.
fn get_mut<'a>(doc: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    let mut at = doc;
    for token in tokens(path).ok()? {
        at = match at {
            Value::Object(map) => map.get_mut(&token)?,
            Value::Array(items) => {
                let at = index(&token, items.len())?;
                items.get_mut(at)?
            }
            _ => return None,
        };
    }
    Some(at)
}

fn index(token: &str, len: usize) -> Option<usize> {
    if token.is_empty() || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse::<usize>().ok().filter(|i| *i < len)
}

/// The container a pointer's last token is in, and that token.
fn parent<'a>(doc: &'a mut Value, path: &str) -> Result<(&'a mut Value, String), String> {
    let mut tokens = tokens(path)?;
    let last = tokens
        .pop()
        .ok_or_else(|| "the whole document has no parent".to_string())?;
    let parent_path: String = tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect();
    let container = get_mut(doc, &parent_path)
        .ok_or_else(|| format!("doc is missing path: {path:?}: missing value"))?;
    Ok((container, last))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (container, last) = parent(doc, path)?;
    match container {
        Value::Object(map) => {
            map.insert(last, value);
            Ok(())
        }
        Value::Array(items) => {
            let at = if last == "-" {
                items.len()
            } else {
                index(&last, items.len() + 1).ok_or_else(|| {
                    format!("Unable to access invalid index: {last}: invalid index referenced")
                })?
            };
            items.insert(at, value);
            Ok(())
        }
        _ => Err(format!("doc is missing path: {path:?}: missing value")),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (container, last) = parent(doc, path)?;
    let removed = match container {
        Value::Object(map) => map.shift_remove(&last),
        Value::Array(items) => index(&last, items.len()).map(|i| items.remove(i)),
        _ => None,
    };
    removed.ok_or_else(|| format!("Unable to remove nonexistent key: {last}: missing value"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(doc: Value, patch: Value) -> Result<Value, Status> {
        let mut doc = doc;
        json_patch(&mut doc, patch.to_string().as_bytes()).map(|()| doc)
    }

    #[test]
    fn every_operation_does_what_rfc_6902_says() {
        let doc = json!({"metadata": {"labels": {"a/b": "1"}}, "spec": {"list": [1, 2, 3]}});
        let patch = json!([
            {"op": "test", "path": "/metadata/labels/a~1b", "value": "1"},
            {"op": "add", "path": "/metadata/labels/c", "value": "2"},
            {"op": "remove", "path": "/spec/list/0"},
            {"op": "add", "path": "/spec/list/-", "value": 4},
            {"op": "replace", "path": "/spec/list/0", "value": 9},
            {"op": "copy", "from": "/metadata/labels/c", "path": "/spec/copied"},
            {"op": "move", "from": "/metadata/labels/a~1b", "path": "/spec/moved"}
        ]);
        assert_eq!(
            patched(doc, patch).unwrap(),
            json!({"metadata": {"labels": {"c": "2"}}, "spec": {"list": [9, 3, 4], "copied": "2", "moved": "1"}})
        );
    }

    #[test]
    fn a_failed_operation_is_a_422_and_changes_nothing() {
        let doc = json!({"a": 1});
        let status = patched(
            doc.clone(),
            json!([
                {"op": "add", "path": "/b", "value": 2},
                {"op": "test", "path": "/a", "value": 2}
            ]),
        )
        .unwrap_err();
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            status.details.unwrap().causes[0].message,
            "testing value /a failed: test failed"
        );
        let status = patched(doc.clone(), json!([{"op": "remove", "path": "/x"}])).unwrap_err();
        assert_eq!(
            status.details.unwrap().causes[0].message,
            "error in remove for path: '/x': Unable to remove nonexistent key: x: missing value"
        );
        let status = patched(doc, json!({"op": "add"})).unwrap_err();
        assert_eq!(status.code, 400);
    }
}
