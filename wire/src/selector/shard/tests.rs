use proptest::prelude::*;

use super::*;

const HALF: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";

fn message(text: &str) -> String {
    ShardSelector::parse(text).unwrap_err().to_string()
}

#[test]
fn fnv1a_64_gives_go_hash_fnv_s_golden_values() {
    // Go's hash/fnv fnv_test.go, golden64a.
    for (input, hash) in [
        ("", 0xcbf2_9ce4_8422_2325_u64),
        ("a", 0xaf63_dc4c_8601_ec8c),
        ("ab", 0x089c_4407_b545_986a),
        ("abc", 0xe71f_a219_0541_574b),
    ] {
        assert_eq!(fnv1a_64(input.as_bytes()), hash, "{input:?}");
    }
}

#[test]
fn an_equal_split_covers_the_hash_space_once_in_canonical_selectors() {
    let shards = ShardSelector::equal_split(ShardField::Namespace, 3);
    assert_eq!(
        shards.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "shardRange(object.metadata.namespace, '0x0000000000000000', '0x5555555555555555')",
            "shardRange(object.metadata.namespace, '0x5555555555555555', '0xaaaaaaaaaaaaaaaa')",
            "shardRange(object.metadata.namespace, '0xaaaaaaaaaaaaaaaa', '0x10000000000000000')",
        ]
    );
    for hash in [0, 0x5555_5555_5555_5554, 0x5555_5555_5555_5555, u64::MAX] {
        assert_eq!(shards.iter().filter(|s| s.contains(hash)).count(), 1);
    }
    assert_eq!(
        ShardSelector::equal_split(ShardField::Uid, 1)[0].ranges()[0].end(),
        1 << 64
    );
}

#[test]
fn a_selector_is_echoed_in_its_canonical_form() {
    for text in [
        HALF,
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
        "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0xc000000000000000')",
    ] {
        assert_eq!(ShardSelector::parse(text).unwrap().to_string(), text);
    }
    for spelling in [
        "  shardRange( object.metadata.uid ,  '0x0000000000000000' ,  '0x8000000000000000' )  ",
        "shardRange(object.metadata.uid,\"0x0000000000000000\",'0x8000000000000000')",
        "(shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'))",
    ] {
        assert_eq!(
            ShardSelector::parse(spelling).unwrap().to_string(),
            HALF,
            "{spelling}"
        );
    }
}

#[test]
fn a_range_is_start_inclusive_and_end_exclusive_up_to_two_to_the_64() {
    let low = ShardSelector::parse(HALF).unwrap();
    assert!(low.contains(0));
    assert!(low.contains(0x7fff_ffff_ffff_ffff));
    assert!(!low.contains(0x8000_0000_0000_0000));
    let high = ShardSelector::parse(
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
    )
    .unwrap();
    assert!(high.contains(u64::MAX));
    assert!(!high.contains(0));
    let by_namespace = ShardSelector::parse(
        "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')",
    )
    .unwrap();
    assert!(
        by_namespace.matches("any", ""),
        "cluster-scoped: the empty namespace"
    );
    assert_eq!(by_namespace.field(), ShardField::Namespace);
    let uid = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    assert_eq!(ShardField::Uid.hash(uid, "x"), 0x9375_4b72_48a0_0eb9);
}

#[test]
fn bad_selectors_get_kube_apiserver_s_messages() {
    let ranged =
        |start: &str, end: &str| format!("shardRange(object.metadata.uid, '{start}', '{end}')");
    for (text, want) in [
        (
            "   ".to_string(),
            "empty shard selector is not allowed; omit the parameter for unfiltered lists",
        ),
        (
            ranged("0000000000000000", "0x8000000000000000"),
            "hexStart must have '0x' prefix, got \"0000000000000000\"",
        ),
        (
            ranged("0x0000000000000000", "8000000000000000"),
            "hexEnd must have '0x' prefix, got \"8000000000000000\"",
        ),
        (
            ranged("0x", "0x8000000000000000"),
            "hexStart: hex value is required after '0x'",
        ),
        (
            ranged("0x000000000000000000", "0x80"),
            "hexStart: hex value too long (18 chars, max 17): \"000000000000000000\"",
        ),
        (
            ranged("0x0g", "0x80"),
            "hexStart: invalid hex character \"g\" in \"0x0g\"",
        ),
        (
            ranged("0x00000000000000AA", "0x80"),
            "hexStart: invalid hex character \"A\" in \"0x00000000000000AA\"",
        ),
        (
            ranged("0x0", "0x8000000000000000"),
            "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
        ),
        (
            ranged("0x0000000000000000", "0xff"),
            "hexEnd must be a 0x-prefixed 16-digit hex value, got \"0xff\" (did you mean \"0x00000000000000ff\"?)",
        ),
        (
            ranged("0x0000000000000000", "0x20000000000000000"),
            "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got \"0x20000000000000000\"",
        ),
        (
            ranged("0x8000000000000000", "0x8000000000000000"),
            "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
        ),
        (
            ranged("0xffffffffffffffff", "0x0000000000000000"),
            "shard range start 0xffffffffffffffff must be less than end 0x0000000000000000",
        ),
        (
            ranged("0x10000000000000000", "0x10000000000000000"),
            "shard range start 0x10000000000000000 must be less than end 0x10000000000000000",
        ),
        (
            "shardRange(object.metadata.name, '0x00', '0x80')".into(),
            "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace",
        ),
        (
            "invalidFunc(object.metadata.uid, '0x00', '0x80')".into(),
            "unsupported function \"invalidFunc\"; only shardRange() and || are allowed",
        ),
        (
            format!("{HALF} && {HALF}"),
            "unsupported function \"_&&_\"; only shardRange() and || are allowed",
        ),
        (
            "object.metadata.uid > '0x0'".into(),
            "unsupported function \"_>_\"; only shardRange() and || are allowed",
        ),
        (
            "shardRange(object.metadata.uid, 0, 8)".into(),
            "hexStart must be a string literal, got int64",
        ),
        (
            "shardRange(object.metadata.uid, '0x0')".into(),
            "shardRange() requires exactly 3 arguments, got 2",
        ),
        (
            "shardRange(object.metadata.uid, hex(0), '0x8')".into(),
            "hexStart must be a string literal (e.g. '0xff'), got expression kind 1",
        ),
        (
            "shardRange('uid', '0x0', '0x8')".into(),
            "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 5",
        ),
        (
            "object".into(),
            "unexpected expression kind 3; expected shardRange() call or || operator",
        ),
        (
            format!(
                "{HALF} || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
            ),
            "all shard ranges must use the same field, got \"object.metadata.uid\" and \"object.metadata.namespace\"",
        ),
    ] {
        assert_eq!(
            message(&text),
            format!("invalid shard selector: {want}"),
            "{text}"
        );
    }
    assert!(
        message("shardRange(")
            .starts_with("invalid shard selector: CEL parse error: Syntax error: ")
    );
}

#[test]
fn a_refusal_is_a_bad_request_status() {
    let status = crate::Status::from(ShardSelector::parse("x").unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
}

/// The bounds of an even split of the hash space into `n` ranges.
fn split(n: u128) -> Vec<ShardRange> {
    (0..n)
        .map(|i| {
            let start = u64::try_from(i * FULL / n).unwrap();
            ShardRange::new(start, (i + 1) * FULL / n).unwrap()
        })
        .collect()
}

proptest! {
    #[test]
    fn the_shards_of_a_split_select_every_value_exactly_once(
        n in prop::sample::select(vec![2u128, 3, 7, 16]),
        uid in "[0-9a-f-]{0,40}",
        namespace in "[a-z0-9-]{0,20}",
        by_namespace: bool,
    ) {
        let field = if by_namespace { ShardField::Namespace } else { ShardField::Uid };
        let shards: Vec<_> = split(n)
            .into_iter()
            .map(|range| ShardSelector::new(field, vec![range]))
            .collect();
        let owners = shards.iter().filter(|s| s.matches(&uid, &namespace)).count();
        prop_assert_eq!(owners, 1);
    }

    #[test]
    fn the_echo_parses_back_to_the_same_selector(
        bounds in prop::collection::vec((any::<u64>(), any::<u64>(), any::<bool>()), 1..5),
        by_namespace: bool,
    ) {
        let field = if by_namespace { ShardField::Namespace } else { ShardField::Uid };
        let ranges = bounds
            .into_iter()
            .map(|(a, b, top)| {
                let (start, end) = (a.min(b), if top { FULL } else { u128::from(a.max(b)) });
                ShardRange::new(start, end).unwrap_or(ShardRange::new(start, FULL).unwrap())
            })
            .collect();
        let selector = ShardSelector::new(field, ranges);
        let echoed = ShardSelector::parse(&selector.to_string()).unwrap();
        prop_assert_eq!(echoed, selector);
    }

    #[test]
    fn any_text_parses_or_is_refused_without_panicking(text in ".{0,80}") {
        let _ = ShardSelector::parse(&text);
    }
}
