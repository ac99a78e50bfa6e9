//! The disk behind [`Files`]: what the pure crates read and write (scenario
//! and command files, manifests, run records, reports) goes through here.

use std::io::{self, Read as _};
use std::path::Path;

use crate::files::{Files, Kind, ReadError};

/// The local file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct Disk;

impl Files for Disk {
    fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
        let file = std::fs::File::open(path).map_err(ReadError::Io)?;
        let meta = file.metadata().map_err(ReadError::Io)?;
        if meta.is_dir() {
            // what reading it would say (EISDIR), before its size is taken
            // for a file's
            return Err(ReadError::Io(io::Error::from_raw_os_error(21)));
        }
        if meta.len() > limit {
            return Err(ReadError::TooLarge(Some(meta.len())));
        }
        let mut bytes = Vec::new();
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(ReadError::Io)?;
        if bytes.len() as u64 > limit {
            return Err(ReadError::TooLarge(None));
        }
        Ok(bytes)
    }

    fn kind(&self, path: &Path) -> Kind {
        if path.is_dir() {
            Kind::Dir
        } else if path.exists() {
            Kind::File
        } else {
            Kind::Missing
        }
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn io::Write + '_>> {
        Ok(Box::new(std::fs::File::create(path)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_no_more_than_the_limit_and_refuses_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        crate::files::write(&Disk, &file, b"12345").unwrap();
        assert_eq!(Disk.read(&file, 5).unwrap(), b"12345");
        assert!(matches!(
            Disk.read(&file, 4),
            Err(ReadError::TooLarge(Some(5)))
        ));
        assert!(matches!(
            Disk.read(dir.path(), 10),
            Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::IsADirectory
        ));
        assert_eq!(Disk.kind(dir.path()), Kind::Dir);
        assert_eq!(Disk.kind(&file), Kind::File);
        assert_eq!(Disk.kind(&dir.path().join("none")), Kind::Missing);
    }
}
