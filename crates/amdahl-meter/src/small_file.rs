//! Bounded reads of kernel files (sysfs, procfs) that hold a line or a few: a file that is not
//! what it should be (a `name` linked to `/dev/zero`, a fake tree gone wrong) must not make the
//! meter read without end. Each read stops at a bound and an over-long file is an error that says
//! which file and how long it may be, like any other unreadable file.

use std::io::Read;
use std::path::Path;

/// The bound for one-value sysfs files (`name`, `energy_uj`, `max_energy_range_uj`, a cgroup
/// line, `osrelease`, `boot_id`): real ones are under 100 bytes.
pub const SMALL: u64 = 4 * 1024;

/// The bound for procfs tables that grow with the machine (`/proc/stat` and `/proc/cpuinfo` are a
/// few hundred bytes to ~2 KiB per CPU; 16 MiB covers thousands of CPUs).
pub const TABLE: u64 = 16 * 1024 * 1024;

/// Read `path` as UTF-8, failing with `InvalidData` when it is longer than `limit` bytes.
pub fn read(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_bytes(path, limit)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The raw bytes of `path` (`environ`, `cmdline`: NUL-separated, not UTF-8), bounded as [`read`].
pub fn read_bytes(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    f.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(too_long(limit));
    }
    Ok(buf)
}

fn too_long(limit: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "longer than {limit} bytes, not a kernel file of this kind (is it a link to a device \
             such as /dev/zero?)"
        ),
    )
}

/// [`read`] with the [`SMALL`] bound.
pub fn read_small(path: &Path) -> std::io::Result<String> {
    read(path, SMALL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_zero_is_refused_after_the_bound_not_read_without_end() {
        let e = read_small(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("longer than 4096 bytes"), "{e}");
    }

    #[test]
    fn a_file_at_the_bound_is_read_whole() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        std::fs::write(&p, "7".repeat(SMALL as usize)).unwrap();
        assert_eq!(read_small(&p).unwrap().len(), SMALL as usize);
        std::fs::write(&p, "7".repeat(SMALL as usize + 1)).unwrap();
        assert!(read_small(&p).is_err());
    }
}
