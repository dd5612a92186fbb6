//! Writing the file the user named, for every `-o`, `--svg`, `--prometheus` and result writer
//! of every command (the CLI's `output::write_file` is this with its error type).

use super::{Context as _, SinkError};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Write `contents` to `path`.
///
/// - A regular file (or a new one) is replaced atomically: a uniquely named temporary file in
///   the target's own directory, renamed over it, so a reader never sees half a result and
///   concurrent writers of one path never collide on a shared `.tmp` name (the last rename
///   wins; none fails). The temporary file is removed if anything fails. An existing file keeps
///   its permissions; a new one gets 0666 less the umask, as `>` in a shell would.
/// - A symbolic link is followed (to any depth, relative links against their own directory) and
///   its target is written; the link stays a link.
/// - A FIFO or character device (`/dev/null`, `/dev/stdout`) is opened and written in place,
///   never renamed over. Directories, sockets and block devices are refused.
pub fn write(path: &Path, contents: &str) -> Result<(), SinkError> {
    write_bytes(path, contents.as_bytes())
}

/// [`write()`] for binary contents (PNG, PDF).
pub fn write_bytes(path: &Path, contents: &[u8]) -> Result<(), SinkError> {
    match destination(path)? {
        Destination::Stream(p) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .context_with(|| format!("opening {} for writing", p.display()))?;
            f.write_all(contents)
                .context_with(|| format!("writing {}", p.display()))
        }
        Destination::File { path: p, keep } => replace(&p, contents, keep),
    }
}

/// Whether `path` names (through links) a FIFO or device that [`write()`] streams to rather
/// than replaces. `amdahl run` writes such outputs once at the end instead of after every sample.
pub fn is_stream(path: &Path) -> bool {
    matches!(destination(path), Ok(Destination::Stream(_)))
}

enum Destination {
    /// Replace by rename; `keep`: the permissions of the file being replaced.
    File {
        path: PathBuf,
        keep: Option<std::fs::Permissions>,
    },
    /// Write in place (FIFO, character device).
    Stream(PathBuf),
}

/// Symbolic links followed before giving up (Linux's own limit, MAXSYMLINKS, is 40).
const MAX_LINKS: usize = 40;

/// Follow `path` through symbolic links to what a write should really change.
fn destination(path: &Path) -> Result<Destination, SinkError> {
    use std::os::unix::fs::FileTypeExt;
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Destination::File {
                    path: p,
                    keep: None,
                })
            }
            Err(e) => {
                return Err(SinkError::caused(
                    format!("cannot write {}", p.display()),
                    e,
                ))
            }
        };
        let ty = meta.file_type();
        if ty.is_symlink() {
            let target = std::fs::read_link(&p)
                .context_with(|| format!("reading the symbolic link {}", p.display()))?;
            p = match p.parent() {
                Some(dir) if target.is_relative() => dir.join(target),
                _ => target,
            };
            continue;
        }
        if ty.is_file() {
            return Ok(Destination::File {
                path: p,
                keep: Some(meta.permissions()),
            });
        }
        if ty.is_fifo() || ty.is_char_device() {
            return Ok(Destination::Stream(p));
        }
        let what = if ty.is_dir() {
            "a directory"
        } else if ty.is_block_device() {
            "a block device"
        } else {
            "a socket"
        };
        return Err(SinkError::new(format!(
            "cannot write {}: it is {what}; give a file name",
            path.display()
        )));
    }
    Err(SinkError::new(format!(
        "cannot write {}: more than {MAX_LINKS} levels of symbolic links (a loop?)",
        path.display()
    )))
}

/// Write a uniquely named temporary file beside `path` and rename it over `path`.
fn replace(
    path: &Path,
    contents: &[u8],
    keep: Option<std::fs::Permissions>,
) -> Result<(), SinkError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(d) => {
            std::fs::create_dir_all(d)
                .context_with(|| format!("creating directory {}", d.display()))?;
            d
        }
        None => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        // The mode at creation, less the umask: what a plain `create` would give.
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .context_with(|| {
            format!(
                "cannot write {} (creating a temporary file in {})",
                path.display(),
                dir.display()
            )
        })?;
    tmp.write_all(contents)
        .context_with(|| format!("writing {}", path.display()))?;
    if let Some(perm) = keep {
        tmp.as_file()
            .set_permissions(perm)
            .context_with(|| format!("keeping the permissions of {}", path.display()))?;
    }
    // On failure the error owns the temporary file and deletes it when dropped.
    tmp.persist(path)
        .map_err(|e| e.error)
        .context_with(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn output_through_symlink_updates_the_target_and_keeps_the_link() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("data/real.json");
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::fs::write(&real, "old").unwrap();
        // A relative link, resolved against the link's own directory.
        let link = t.path().join("out.json");
        std::os::unix::fs::symlink("data/real.json", &link).unwrap();
        write(&link, "new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        // A dangling link creates its target.
        let dangling = t.path().join("d.json");
        std::os::unix::fs::symlink(t.path().join("data/created.json"), &dangling).unwrap();
        write(&dangling, "x").unwrap();
        assert_eq!(
            std::fs::read_to_string(t.path().join("data/created.json")).unwrap(),
            "x"
        );
        assert!(leftovers(t.path()).is_empty() && leftovers(&t.path().join("data")).is_empty());
    }

    #[test]
    fn output_to_dev_null_streams_and_never_replaces_the_device() {
        write(Path::new("/dev/null"), "{}").unwrap();
        use std::os::unix::fs::FileTypeExt;
        let m = std::fs::metadata("/dev/null").unwrap();
        assert!(m.file_type().is_char_device());
        assert!(is_stream(Path::new("/dev/null")));
    }

    #[test]
    fn output_to_fifo_streams_to_its_reader() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("pipe");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let f2 = fifo.clone();
        let reader = std::thread::spawn(move || std::fs::read_to_string(f2).unwrap());
        write(&fifo, "through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn output_to_directory_is_refused_with_the_reason() {
        let t = tempfile::tempdir().unwrap();
        let e = format!("{:#}", write(t.path(), "x").unwrap_err());
        assert!(e.contains("is a directory"), "{e}");
    }

    #[test]
    fn output_keeps_permissions_of_the_file_it_replaces() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("r.prom");
        std::fs::write(&p, "a").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        write(&p, "b").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }

    #[test]
    fn concurrent_writers_of_one_path_never_fail_or_leave_temporary_files() {
        // The old fixed `path.tmp` made 2-4 of 20 concurrent writers fail.
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("shared.json");
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let p = p.clone();
                std::thread::spawn(move || {
                    (0..20)
                        .map(|k| write(&p, &format!("writer {i} round {k}")))
                        .collect::<Result<Vec<_>, SinkError>>()
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.starts_with("writer ") && text.ends_with("round 19"),
            "{text}"
        );
        assert!(leftovers(t.path()).is_empty());
    }
}
