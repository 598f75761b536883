//! Container image references: as the runtime reports them, their digests, and
//! the next tag (`kubectl set image`).

use std::fmt::Write as _;

use super::random::hash;

/// The image reference as containerd reports it: `nginx:1` becomes
/// `docker.io/library/nginx:1`.
pub(super) fn normalise_image(image: &str) -> String {
    let first = image.split('/').next().unwrap_or_default();
    if image.contains('/') && (first.contains('.') || first.contains(':')) {
        image.to_owned()
    } else if image.contains('/') {
        format!("docker.io/{image}")
    } else {
        format!("docker.io/library/{image}")
    }
}

/// `repo@sha256:...`, stable per image.
pub(super) fn image_id(seed: u64, image: &str) -> String {
    let normalised = normalise_image(image);
    let repo = match normalised.rfind(':') {
        Some(i) if i > normalised.rfind('/').unwrap_or(0) => &normalised[..i],
        _ => &normalised,
    };
    let mut digest = String::with_capacity(64);
    for i in 0..4u64 {
        let _ = write!(digest, "{:016x}", hash(seed ^ i, &[image]));
    }
    format!("{repo}@sha256:{digest}")
}

/// The image with the last number of its tag incremented
/// (`app:1.4.2` → `app:1.4.3`).
pub(super) fn bump_tag(image: &str) -> String {
    let tag_start = image
        .rfind(':')
        .filter(|&i| i > image.rfind('/').unwrap_or(0))
        .map_or(image.len(), |i| i + 1);
    let tag = &image[tag_start..];
    let Some(end) = tag.rfind(|c: char| c.is_ascii_digit()).map(|i| i + 1) else {
        return format!("{image}-1");
    };
    let start = tag[..end]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    let n: u64 = tag[start..end].parse().unwrap_or(0);
    format!(
        "{}{}{}{}",
        &image[..tag_start],
        &tag[..start],
        n + 1,
        &tag[end..]
    )
}
