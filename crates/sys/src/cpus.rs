//! Sets of CPUs in the kernel's cpulist form (`0-3,8`): one parser and one printer for the knobs, /proc
//! readers and a serve class's `cpus`, and a fixed-size set that is `Copy`, so a thread's work priority
//! carrying one costs no allocation per request.

use std::fmt;
use std::str::FromStr;

/// The most CPUs a set holds (glibc's CPU_SETSIZE).
pub const MAX_CPUS: usize = 1024;

/// A set of CPU numbers below [`MAX_CPUS`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuSet {
    bits: [u64; MAX_CPUS / 64],
}

impl CpuSet {
    /// The empty set.
    pub const fn empty() -> CpuSet {
        CpuSet {
            bits: [0; MAX_CPUS / 64],
        }
    }

    /// The set of `cpus`; a number at or above [`MAX_CPUS`] is an error naming it.
    pub fn from_cpus(cpus: &[usize]) -> Result<CpuSet, String> {
        let mut s = CpuSet::empty();
        for &c in cpus {
            if c >= MAX_CPUS {
                return Err(format!("CPU {c} is beyond the {MAX_CPUS} a set can hold"));
            }
            s.bits[c / 64] |= 1 << (c % 64);
        }
        Ok(s)
    }

    pub fn contains(&self, cpu: usize) -> bool {
        cpu < MAX_CPUS && self.bits[cpu / 64] & (1 << (cpu % 64)) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    pub fn len(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..MAX_CPUS).filter(|&c| self.contains(c))
    }

    pub fn to_vec(&self) -> Vec<usize> {
        self.iter().collect()
    }

    /// The CPUs of `self` that are not in `other`.
    pub fn minus(&self, other: &CpuSet) -> CpuSet {
        let mut s = *self;
        for (a, b) in s.bits.iter_mut().zip(other.bits.iter()) {
            *a &= !b;
        }
        s
    }
}

impl fmt::Display for CpuSet {
    /// The compact cpulist form (`0-3,8`); the empty set prints as nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_list(&self.to_vec()))
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl FromStr for CpuSet {
    type Err = String;

    /// A non-empty cpulist (`0-3,8`).
    fn from_str(s: &str) -> Result<CpuSet, String> {
        CpuSet::from_cpus(&parse_list(s)?)
    }
}

impl<'de> serde::Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CpuSet, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(|e| {
            serde::de::Error::custom(format!("\"{s}\": {e} (a CPU list such as \"0-3,8\")"))
        })
    }
}

impl serde::Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// Expand a kernel CPU list (`0-3,6,8-9`) into sorted, distinct CPU numbers; an empty list is an error.
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |x: &str| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{x}` is not a CPU number"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b || b - a > 65_536 {
                    return Err(format!("bad CPU range `{part}`"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    if out.is_empty() {
        return Err("empty CPU list".into());
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The compact cpulist form of sorted CPU numbers.
pub fn format_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_print() {
        assert_eq!(parse_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(parse_list(" 5, 0-2 ,1").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_list("3-1").is_err());
        assert!(parse_list("").is_err());
        assert!(
            parse_list("a")
                .unwrap_err()
                .contains("`a` is not a CPU number")
        );
        assert_eq!(format_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(format_list(&[]), "");
    }

    #[test]
    fn sets() {
        let s: CpuSet = "4-7,12-15".parse().unwrap();
        assert_eq!(s.len(), 8);
        assert!(s.contains(4) && s.contains(15) && !s.contains(8) && !s.contains(5000));
        assert_eq!(s.to_string(), "4-7,12-15");
        assert_eq!(s.minus(&"0-5".parse().unwrap()).to_string(), "6-7,12-15");
        assert!(CpuSet::empty().is_empty());
        assert!("1023".parse::<CpuSet>().is_ok());
        assert!(
            "1024"
                .parse::<CpuSet>()
                .unwrap_err()
                .contains("beyond the 1024")
        );
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(j, "\"4-7,12-15\"");
        assert_eq!(serde_json::from_str::<CpuSet>(&j).unwrap(), s);
        let e = serde_json::from_str::<CpuSet>("\"x\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"x\": `x` is not a CPU number"), "{e}");
    }
}
