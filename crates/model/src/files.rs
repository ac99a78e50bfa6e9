//! The file system as the pure crates see it. The crates that define a file
//! format (scenario and command files, manifests, `result.json`, reports) do
//! no I/O of their own: they read and write through [`Files`], and
//! `nodefall_io::files::Disk` is the one implementation that touches the
//! disk. [`Memory`] holds files in memory for tests.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Reading and writing files.
pub trait Files {
    /// The bytes of the file at `path`, at most `limit` of them: a larger
    /// file is [`ReadError::TooLarge`], and no more than `limit + 1` bytes
    /// are read from a device or a file that grows.
    fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError>;
    /// What is at `path`.
    fn kind(&self, path: &Path) -> Kind;
    /// Creates `dir` and its parents, as needed.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// A new (or emptied) file at `path` to write to; writes are unbuffered.
    fn create(&self, path: &Path) -> io::Result<Box<dyn io::Write + '_>>;
}

/// Why [`Files::read`] gave no bytes.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// Its size, when known, is over the limit.
    TooLarge(Option<u64>),
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Missing,
}

/// Writes all of `bytes` to a new file at `path`.
pub fn write(files: &dyn Files, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut out = files.create(path)?;
    out.write_all(bytes)?;
    out.flush()
}

/// Files held in memory: directories are the parents of the files put in.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    files: Arc<Mutex<BTreeMap<PathBuf, Vec<u8>>>>,
}

impl Memory {
    /// Puts a file at `path` holding `bytes`.
    pub fn put(&self, path: impl Into<PathBuf>, bytes: impl Into<Vec<u8>>) -> &Memory {
        self.lock().insert(path.into(), bytes.into());
        self
    }

    /// The bytes of the file at `path`, if there is one.
    pub fn get(&self, path: &Path) -> Option<Vec<u8>> {
        self.lock().get(path).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, Vec<u8>>> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Files for Memory {
    fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
        match self.get(path) {
            Some(b) if b.len() as u64 > limit => Err(ReadError::TooLarge(Some(b.len() as u64))),
            Some(b) => Ok(b),
            None if self.kind(path) == Kind::Dir => {
                Err(ReadError::Io(io::ErrorKind::IsADirectory.into()))
            }
            None => Err(ReadError::Io(io::Error::new(
                io::ErrorKind::NotFound,
                "No such file or directory (os error 2)",
            ))),
        }
    }

    fn kind(&self, path: &Path) -> Kind {
        let files = self.lock();
        if files.contains_key(path) {
            Kind::File
        } else if files.keys().any(|f| f.starts_with(path)) {
            Kind::Dir
        } else {
            Kind::Missing
        }
    }

    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn io::Write + '_>> {
        self.put(path, Vec::new());
        Ok(Box::new(MemoryFile {
            memory: self,
            path: path.to_path_buf(),
        }))
    }
}

/// A file of a [`Memory`] being written.
struct MemoryFile<'a> {
    memory: &'a Memory,
    path: PathBuf,
}

impl io::Write for MemoryFile<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.memory
            .lock()
            .entry(self.path.clone())
            .or_default()
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_reads_back_what_was_written_and_knows_its_directories() {
        let m = Memory::default();
        write(&m, Path::new("out/run/report.md"), b"# run").unwrap();
        assert_eq!(m.read(Path::new("out/run/report.md"), 5).unwrap(), b"# run");
        assert!(matches!(
            m.read(Path::new("out/run/report.md"), 4),
            Err(ReadError::TooLarge(Some(5)))
        ));
        assert_eq!(m.kind(Path::new("out/run")), Kind::Dir);
        assert_eq!(m.kind(Path::new("out/run/report.md")), Kind::File);
        assert_eq!(m.kind(Path::new("elsewhere")), Kind::Missing);
        assert!(matches!(
            m.read(Path::new("out"), 10),
            Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::IsADirectory
        ));
    }
}
