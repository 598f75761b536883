//! The text forms Go gives `meta.v1.Time`, `MicroTime` and `Duration` in JSON:
//! RFC 3339 timestamps (`time.RFC3339`, `RFC3339Micro`) and
//! `time.Duration.String()` / `time.ParseDuration`.

/// `time.Time{}.Unix()` in Go: the zero time, which Go writes to JSON as `null`.
pub(crate) const GO_ZERO_UNIX: i64 = -62_135_596_800;

const NANOS_PER_SEC: i64 = 1_000_000_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month, day) of a count of days since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

fn digits(s: &[u8], at: usize, n: usize) -> Option<u32> {
    let part = s.get(at..at + n)?;
    part.iter().try_fold(0u32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

/// Parses an RFC 3339 timestamp as Go's `time.Parse(time.RFC3339, s)` does
/// (fractional seconds allowed, `Z` or a `±hh:mm` offset) into Unix seconds
/// and nanoseconds.
pub(crate) fn parse_rfc3339(s: &str) -> Option<(i64, u32)> {
    let b = s.as_bytes();
    let year = i64::from(digits(b, 0, 4)?);
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    let hour = digits(b, 11, 2)?;
    let minute = digits(b, 14, 2)?;
    let second = digits(b, 17, 2)?;
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || b.get(10) != Some(&b'T')
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
        || !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut at = 19;
    let mut nanos = 0u32;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            if at - start < 9 {
                nanos = nanos * 10 + u32::from(b[at] - b'0');
            }
            at += 1;
        }
        let n = at - start;
        if n == 0 {
            return None;
        }
        for _ in n..9 {
            nanos *= 10;
        }
    }
    let offset = match b.get(at..)? {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), rest @ ..] if rest.len() == 5 && rest[2] == b':' => {
            let h = i64::from(digits(rest, 0, 2)?);
            let m = i64::from(digits(rest, 3, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let off = h * 3600 + m * 60;
            if *sign == b'-' { -off } else { off }
        }
        _ => return None,
    };
    let secs = days_from_civil(year, month, day) * 86_400
        + i64::from(hour) * 3600
        + i64::from(minute) * 60
        + i64::from(second)
        - offset;
    Some((secs, nanos))
}

fn push_2(out: &mut Vec<u8>, v: u32) {
    out.push(b'0' + (v / 10) as u8);
    out.push(b'0' + (v % 10) as u8);
}

/// Writes `"2006-01-02T15:04:05Z"` (with `.000000` microseconds when
/// `micros` is given), quoted. Returns false, writing nothing, when the year
/// is outside 0..=9999 (Go cannot write those either).
pub(crate) fn write_rfc3339(out: &mut Vec<u8>, secs: i64, micros: Option<u32>) -> bool {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400) as u32;
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return false;
    }
    let year = year as u32;
    out.push(b'"');
    push_2(out, year / 100);
    push_2(out, year % 100);
    out.push(b'-');
    push_2(out, month);
    out.push(b'-');
    push_2(out, day);
    out.push(b'T');
    push_2(out, sod / 3600);
    out.push(b':');
    push_2(out, sod / 60 % 60);
    out.push(b':');
    push_2(out, sod % 60);
    if let Some(us) = micros {
        out.push(b'.');
        let mut digits = [b'0'; 6];
        let mut v = us;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        out.extend_from_slice(&digits);
    }
    out.extend_from_slice(b"Z\"");
    true
}

/// Parses a Go duration string (`time.ParseDuration`) into nanoseconds.
pub(crate) fn parse_go_duration(s: &str) -> Option<i64> {
    let mut s = s.as_bytes();
    let mut neg = false;
    if let Some((&c, rest)) = s.split_first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = rest;
    }
    if s == b"0" {
        return Some(0);
    }
    if s.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return None;
        }
        // Integer part.
        let mut v: u64 = 0;
        let mut i = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            v = v.checked_mul(10)?.checked_add(u64::from(s[i] - b'0'))?;
            i += 1;
        }
        let pre = i > 0;
        s = &s[i..];
        // Fraction.
        let mut frac: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut post = false;
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let mut i = 0;
            let mut overflow = false;
            while i < s.len() && s[i].is_ascii_digit() {
                if !overflow {
                    match frac
                        .checked_mul(10)
                        .and_then(|x| x.checked_add(u64::from(s[i] - b'0')))
                    {
                        Some(x) => {
                            frac = x;
                            scale *= 10.0;
                        }
                        None => overflow = true,
                    }
                }
                i += 1;
            }
            post = i > 0;
            s = &s[i..];
        }
        if !pre && !post {
            return None;
        }
        // Unit.
        let unit_len = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return None;
        }
        let unit: u64 = match &s[..unit_len] {
            b"ns" => 1,
            // "us", "µs" (U+00B5) and "μs" (U+03BC).
            b"us" | [0xC2, 0xB5, b's'] | [0xCE, 0xBC, b's'] => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            _ => return None,
        };
        s = &s[unit_len..];
        if v > (1u64 << 63) / unit {
            return None;
        }
        v *= unit;
        if frac > 0 {
            v += (frac as f64 * (unit as f64 / scale)) as u64;
            if v > 1u64 << 63 {
                return None;
            }
        }
        total = total.checked_add(v)?;
        if total > 1u64 << 63 {
            return None;
        }
    }
    if neg {
        Some((total as i64).wrapping_neg())
    } else {
        i64::try_from(total).ok()
    }
}

/// Formats nanoseconds as Go's `time.Duration.String()`: `1h2m3.5s`, `5m0s`,
/// `300ms`, `1.5µs`, `0s`.
pub(crate) fn format_go_duration(d: i64) -> String {
    // Built backwards, as Go does.
    fn frac(buf: &mut Vec<u8>, mut v: u64, prec: usize) -> u64 {
        let mut print = false;
        for _ in 0..prec {
            let digit = v % 10;
            print = print || digit != 0;
            if print {
                buf.push(b'0' + digit as u8);
            }
            v /= 10;
        }
        if print {
            buf.push(b'.');
        }
        v
    }
    fn int(buf: &mut Vec<u8>, mut v: u64) {
        loop {
            buf.push(b'0' + (v % 10) as u8);
            v /= 10;
            if v == 0 {
                break;
            }
        }
    }
    let mut rev: Vec<u8> = Vec::with_capacity(24);
    let mut u = d.unsigned_abs();
    if u < NANOS_PER_SEC as u64 {
        rev.push(b's');
        let prec = match u {
            0 => {
                return "0s".to_string();
            }
            1..1_000 => {
                rev.push(b'n');
                0
            }
            1_000..1_000_000 => {
                // "µ" is 0xC2 0xB5, pushed backwards.
                rev.extend_from_slice(&[0xB5, 0xC2]);
                3
            }
            _ => {
                rev.push(b'm');
                6
            }
        };
        u = frac(&mut rev, u, prec);
        int(&mut rev, u);
    } else {
        rev.push(b's');
        u = frac(&mut rev, u, 9);
        int(&mut rev, u % 60);
        u /= 60;
        if u > 0 {
            rev.push(b'm');
            int(&mut rev, u % 60);
            u /= 60;
            if u > 0 {
                rev.push(b'h');
                int(&mut rev, u);
            }
        }
    }
    if d < 0 {
        rev.push(b'-');
    }
    rev.reverse();
    String::from_utf8(rev).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt_time(secs: i64, micros: Option<u32>) -> String {
        let mut out = Vec::new();
        assert!(write_rfc3339(&mut out, secs, micros));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn rfc3339_round_trips_and_matches_known_instants() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some((0, 0)));
        assert_eq!(
            parse_rfc3339("2024-01-02T03:04:05Z"),
            Some((1_704_164_645, 0))
        );
        assert_eq!(
            parse_rfc3339("2024-01-02T05:04:05.123456+02:00"),
            Some((1_704_164_645, 123_456_000))
        );
        assert_eq!(
            parse_rfc3339("0001-01-01T00:00:00Z"),
            Some((GO_ZERO_UNIX, 0))
        );
        assert_eq!(fmt_time(1_704_164_645, None), "\"2024-01-02T03:04:05Z\"");
        assert_eq!(
            fmt_time(1_704_164_645, Some(123_456)),
            "\"2024-01-02T03:04:05.123456Z\""
        );
        assert_eq!(fmt_time(-1, None), "\"1969-12-31T23:59:59Z\"");
        assert_eq!(fmt_time(951_782_400, None), "\"2000-02-29T00:00:00Z\"");
        for secs in [
            0i64,
            1,
            86_399,
            951_782_400,
            4_102_444_800,
            -86_400 * 365 * 300,
        ] {
            let text = fmt_time(secs, None);
            assert_eq!(parse_rfc3339(text.trim_matches('"')), Some((secs, 0)));
        }
        for bad in [
            "",
            "2024-01-02",
            "2024-01-02 03:04:05Z",
            "2024-13-02T03:04:05Z",
            "2023-02-29T03:04:05Z",
            "2024-01-02T24:04:05Z",
            "2024-01-02T03:04:05",
            "2024-01-02T03:04:05.Z",
            "2024-01-02T03:04:05+0200",
            "2024-01-02T03:04:05Zjunk",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
        let mut out = Vec::new();
        assert!(!write_rfc3339(&mut out, i64::MAX / 2, None));
        assert!(out.is_empty());
    }

    #[test]
    fn go_durations_format_and_parse_like_go() {
        let s = 1_000_000_000i64;
        for (ns, text) in [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (300_000_000, "300ms"),
            (s, "1s"),
            (1_500_000_000, "1.5s"),
            (300 * s, "5m0s"),
            (3723 * s, "1h2m3s"),
            (7200 * s, "2h0m0s"),
            (-90 * s, "-1m30s"),
            (i64::MAX, "2562047h47m16.854775807s"),
        ] {
            assert_eq!(format_go_duration(ns), text);
            assert_eq!(parse_go_duration(text), Some(ns), "{text}");
        }
        assert_eq!(parse_go_duration("1.5h"), Some(5400 * s));
        assert_eq!(parse_go_duration("1h30m"), Some(5400 * s));
        assert_eq!(parse_go_duration("+10us"), Some(10_000));
        assert_eq!(parse_go_duration(".5s"), Some(500_000_000));
        assert_eq!(
            parse_go_duration("-2562047h47m16.854775808s"),
            Some(i64::MIN)
        );
        for bad in ["", "1", "s", "1x", "1.s.", ".s", "-", "9999999999999h"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }
}
