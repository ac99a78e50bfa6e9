//! A command line: what the command-file format's templates expand to and
//! what `crate::exec` runs.

use std::fmt;

/// A command line: program and arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    pub program: String,
    pub args: Vec<String>,
}

impl Cmd {
    pub fn new(program: &str, args: &[&str]) -> Cmd {
        Cmd {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.program)?;
        for a in &self.args {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\{}".contains(c)) {
                write!(f, " '{}'", a.replace('\'', r"'\''"))?;
            } else {
                write!(f, " {a}")?;
            }
        }
        Ok(())
    }
}
