//! What this process costs, read from `/proc/self`: resident memory now and
//! at its peak, and CPU time used.

use anyhow::{Context, bail};

/// `VmRSS` (resident now) and `VmHWM` (the peak of resident), in bytes.
pub fn rss() -> anyhow::Result<(u64, u64)> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    Ok((
        status_kb(&status, "VmRSS:")? * 1024,
        status_kb(&status, "VmHWM:")? * 1024,
    ))
}

fn status_kb(status: &str, field: &str) -> anyhow::Result<u64> {
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("no {field} in /proc/self/status"))?;
    let mut words = line[field.len()..].split_whitespace();
    match (words.next().map(str::parse::<u64>), words.next()) {
        (Some(Ok(kb)), Some("kB")) => Ok(kb),
        _ => bail!("unexpected /proc/self/status line {line:?}"),
    }
}

/// Resets `VmHWM` to the current resident size (`echo 5 > clear_refs`,
/// Linux 4.0+), so that a later peak belongs to what happens after.
pub fn reset_peak() -> anyhow::Result<()> {
    std::fs::write("/proc/self/clear_refs", "5")
        .context("resetting the peak RSS via /proc/self/clear_refs")
}

/// User plus system CPU seconds of the whole process (all threads), from
/// `/proc/self/stat`.
pub fn cpu_seconds() -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").context("reading /proc/self/stat")?;
    cpu_from_stat(&stat, clock_ticks())
}

fn cpu_from_stat(stat: &str, ticks_per_sec: f64) -> anyhow::Result<f64> {
    // The command name (field 2) is in parentheses and may hold spaces;
    // fields after it start at 3 (state). utime and stime are 14 and 15.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("no ')' in /proc/self/stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| -> anyhow::Result<f64> {
        let field = fields.get(i - 3).context("/proc/self/stat is too short")?;
        Ok(field.parse::<u64>().context("a CPU time field")? as f64)
    };
    Ok((tick(14)? + tick(15)?) / ticks_per_sec)
}

/// `USER_HZ` as `getconf CLK_TCK` says (100 on every Linux this runs on;
/// asked rather than assumed, since reading it directly needs libc), asked
/// once.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(ask_clock_ticks)
}

fn ask_clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 3 0 100";
        assert_eq!(cpu_from_stat(stat, 100.0).unwrap(), 3.0);
    }

    #[test]
    fn this_process_has_a_resident_size_and_a_peak() {
        let (rss, peak) = rss().unwrap();
        assert!(rss > 0 && peak >= rss);
        assert!(cpu_seconds().unwrap() >= 0.0);
    }
}
