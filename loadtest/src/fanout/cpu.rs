//! CPU time of the processes serving a target, from `/proc/PID/stat`.

use anyhow::{Context, bail};

/// Clock ticks per second of `/proc`'s times (Linux's `USER_HZ`, 100 on
/// every architecture it runs on here).
const USER_HZ: f64 = 100.0;

/// The pids of `--target-pids`' value: `PID[,PID...]`.
pub(super) fn pids(value: &str) -> anyhow::Result<Vec<u32>> {
    value
        .split(',')
        .map(|pid| {
            pid.trim()
                .parse()
                .with_context(|| format!("{pid:?} is not a pid"))
        })
        .collect()
}

/// User and system CPU seconds the processes `pids` spent so far, all
/// threads; `None` without pids.
pub(super) fn seconds(pids: &[u32]) -> anyhow::Result<Option<f64>> {
    if pids.is_empty() {
        return Ok(None);
    }
    let mut total = 0.0;
    for pid in pids {
        let path = format!("/proc/{pid}/stat");
        let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        total += stat_seconds(&stat).with_context(|| format!("{path}: {stat:?}"))?;
    }
    Ok(Some(total))
}

/// utime + stime of a `/proc/PID/stat` line, in seconds. The command
/// name, field 2, is in parentheses and may hold spaces and parentheses:
/// the fields after it are counted from its last `)`.
fn stat_seconds(stat: &str) -> anyhow::Result<f64> {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        bail!("no command name");
    };
    // Fields 3 onward; utime and stime are fields 14 and 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        let field = fields.get(i - 3).context("too few fields")?;
        Ok(field.parse::<u64>().context("not a tick count")? as f64)
    };
    Ok((ticks(14)? + ticks(15)?) / USER_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utime_and_stime_are_counted_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 \
                    900 0 0 0 250 50 0 0 20 0 12 0 1234 0 0";
        assert_eq!(stat_seconds(stat).unwrap(), 3.0);
        assert!(stat_seconds("4242 (cut) S 1").is_err());
        assert_eq!(pids("12, 34").unwrap(), vec![12, 34]);
        assert!(pids("12,x").is_err());
    }

    #[test]
    fn a_process_that_works_is_seen_spending_cpu() {
        let me = [std::process::id()];
        let before = seconds(&me).unwrap().unwrap();
        let mut work = 0u64;
        while seconds(&me).unwrap().unwrap() <= before {
            for i in 0..1_000_000 {
                work = std::hint::black_box(work.wrapping_add(i));
            }
        }
        assert_eq!(seconds(&[]).unwrap(), None);
    }
}
