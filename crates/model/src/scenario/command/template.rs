//! Command templates: `qm suspend {machine}` -> a command line, with the
//! node's facts substituted so that no value can become a second argument
//! or a second command.
//!
//! Without a shell a template is split into words first (single and double
//! quotes and backslashes as in `sh`), then each placeholder is replaced
//! inside its word. With `shell: true` the text goes to `sh -c` with each
//! placeholder written `"$N"` and the values passed as the script's
//! positional parameters, so the shell never parses a value (not in a
//! heredoc, not in backticks); the user must not quote placeholders.
//! A value that starts with `-` is refused: it could be read as an option.
//! `{{` and `}}` are literal braces everywhere.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Cmd;

/// A value a template can name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Var {
    Node,
    Machine,
    InternalIp,
    ExternalIp,
    Hostname,
    SystemUuid,
    ProviderId,
    Label(String),
    Annotation(String),
}

/// The names a template may use, for messages.
pub const NAMES: &str = "{node}, {machine}, {internalIP}, {externalIP}, {hostname}, \
                         {systemUUID}, {providerID}, {label:KEY}, {annotation:KEY}";

impl Var {
    /// True for the node's own addresses: a command that uses one reaches
    /// the node itself.
    pub fn is_node_address(&self) -> bool {
        matches!(self, Var::InternalIp | Var::ExternalIp | Var::Hostname)
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Var::Node => f.write_str("node"),
            Var::Machine => f.write_str("machine"),
            Var::InternalIp => f.write_str("internalIP"),
            Var::ExternalIp => f.write_str("externalIP"),
            Var::Hostname => f.write_str("hostname"),
            Var::SystemUuid => f.write_str("systemUUID"),
            Var::ProviderId => f.write_str("providerID"),
            Var::Label(k) => write!(f, "label:{k}"),
            Var::Annotation(k) => write!(f, "annotation:{k}"),
        }
    }
}

/// `{var}` or `{var|last}` (the text after the last `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub var: Var,
    pub last: bool,
}

impl fmt::Display for Placeholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{{}{}}}",
            self.var,
            if self.last { "|last" } else { "" }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Lit(String),
    Var(Placeholder),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub text: String,
    pub shell: bool,
    /// Without a shell: the words. With one: a single "word", the script.
    words: Vec<Vec<Piece>>,
}

/// A template that does not parse, with the character it went wrong at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (character {at} of `{text}`)")]
pub struct ParseError {
    pub text: String,
    /// 1-based character position.
    pub at: usize,
    pub message: String,
}

/// Why a template could not be filled in for a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfilled {
    /// A value the node does not have (no ExternalIP, no such label).
    Missing(Placeholder),
    /// A value that starts with `-`: a program could read it as an option.
    Dash(Placeholder, String),
}

impl fmt::Display for Unfilled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfilled::Missing(p) => write!(f, "it has no value for {p}"),
            Unfilled::Dash(p, v) => write!(
                f,
                "its value for {p} is `{v}`, which starts with `-` and could be read as an \
                 option; refused"
            ),
        }
    }
}

impl Template {
    pub fn parse(text: &str, shell: bool) -> Result<Template, ParseError> {
        let err = |at: usize, message: String| ParseError {
            text: text.to_owned(),
            at: at + 1,
            message,
        };
        let chars: Vec<char> = text.chars().collect();
        let mut words: Vec<Vec<Piece>> = Vec::new();
        let mut word: Vec<Piece> = Vec::new();
        let mut lit = String::new();
        let mut in_word = false;
        let mut quote: Option<char> = None;
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            // Braces first: they mean the same inside and outside quotes.
            if c == '{' && chars.get(i + 1) == Some(&'{') {
                lit.push('{');
                in_word = true;
                i += 2;
                continue;
            }
            if c == '}' && chars.get(i + 1) == Some(&'}') {
                lit.push('}');
                in_word = true;
                i += 2;
                continue;
            }
            if c == '}' {
                return Err(err(i, "a lone `}`: write `}}` for a literal brace".into()));
            }
            if c == '{' {
                let end = chars[i..].iter().position(|&c| c == '}').ok_or_else(|| {
                    err(
                        i,
                        "`{` is not closed: write `{{` for a literal brace".into(),
                    )
                })?;
                let inner: String = chars[i + 1..i + end].iter().collect();
                let p = placeholder(&inner).map_err(|m| err(i, m))?;
                if shell && quote.is_some() {
                    return Err(err(
                        i,
                        format!(
                            "{p} is inside quotes: with `shell: true` nodefall quotes each value \
                             itself; remove the quotes around it"
                        ),
                    ));
                }
                if !lit.is_empty() {
                    word.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                word.push(Piece::Var(p));
                in_word = true;
                i += end + 1;
                continue;
            }
            if shell {
                // The shell reads the text; only track quotes to refuse a
                // placeholder inside them.
                match (quote, c) {
                    (None, '\'' | '"') => quote = Some(c),
                    (Some(q), c) if c == q => quote = None,
                    (Some('"') | None, '\\') => {
                        lit.push(c);
                        if let Some(&n) = chars.get(i + 1) {
                            lit.push(n);
                        }
                        i += 2;
                        continue;
                    }
                    _ => {}
                }
                lit.push(c);
                i += 1;
                continue;
            }
            match (quote, c) {
                (None, c) if c.is_whitespace() => {
                    if in_word {
                        if !lit.is_empty() {
                            word.push(Piece::Lit(std::mem::take(&mut lit)));
                        }
                        words.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                (None, '\'' | '"') => {
                    quote = Some(c);
                    in_word = true;
                }
                (Some(q), c) if c == q => quote = None,
                // A line continuation, as in sh.
                (None | Some('"'), '\\') if chars.get(i + 1) == Some(&'\n') => i += 1,
                (None, '\\') => {
                    let n = chars
                        .get(i + 1)
                        .ok_or_else(|| err(i, "a `\\` at the end escapes nothing".into()))?;
                    lit.push(*n);
                    in_word = true;
                    i += 1;
                }
                (Some('"'), '\\') if matches!(chars.get(i + 1), Some('"' | '\\' | '$' | '`')) => {
                    lit.push(chars[i + 1]);
                    i += 1;
                }
                (_, c) => {
                    lit.push(c);
                    in_word = true;
                }
            }
            i += 1;
        }
        if let Some(q) = quote {
            return Err(err(
                chars.len().saturating_sub(1),
                format!("a `{q}` is not closed"),
            ));
        }
        if !lit.is_empty() {
            word.push(Piece::Lit(lit));
        }
        if shell {
            words = vec![word];
        } else if in_word {
            words.push(word);
        }
        let empty = words.iter().all(Vec::is_empty);
        if empty {
            return Err(err(0, "the command is empty".into()));
        }
        Ok(Template {
            text: text.to_owned(),
            shell,
            words,
        })
    }

    /// Every placeholder, in order.
    pub fn placeholders(&self) -> impl Iterator<Item = &Placeholder> {
        self.words.iter().flatten().filter_map(|p| match p {
            Piece::Var(v) => Some(v),
            Piece::Lit(_) => None,
        })
    }

    /// The command line with each placeholder's value; the first value a
    /// node does not have, or that starts with `-`, is an error.
    pub fn render(&self, value: impl Fn(&Var) -> Option<String>) -> Result<Cmd, Unfilled> {
        self.fill(value, true)
    }

    fn fill(&self, value: impl Fn(&Var) -> Option<String>, strict: bool) -> Result<Cmd, Unfilled> {
        let get = |p: &Placeholder| {
            let v = value(&p.var).ok_or_else(|| Unfilled::Missing(p.clone()))?;
            let v = if p.last {
                v.rsplit('/').next().unwrap_or_default().to_owned()
            } else {
                v
            };
            if strict && v.starts_with('-') {
                return Err(Unfilled::Dash(p.clone(), v));
            }
            Ok(v)
        };
        if self.shell {
            // Values go in as positional parameters, never into the script.
            let mut script = String::new();
            let mut args = vec!["-c".to_owned(), String::new(), "sh".to_owned()];
            for piece in self.words.iter().flatten() {
                match piece {
                    Piece::Lit(l) => script.push_str(l),
                    Piece::Var(p) => {
                        args.push(get(p)?);
                        let n = args.len() - 3;
                        script.push_str(&format!("\"${{{n}}}\""));
                    }
                }
            }
            args[1] = script;
            return Ok(Cmd {
                program: "sh".into(),
                args,
            });
        }
        let mut words = Vec::with_capacity(self.words.len());
        for w in &self.words {
            let mut s = String::new();
            for piece in w {
                match piece {
                    Piece::Lit(l) => s.push_str(l),
                    Piece::Var(p) => s.push_str(&get(p)?),
                }
            }
            words.push(s);
        }
        let program = words.remove(0);
        Ok(Cmd {
            program,
            args: words,
        })
    }

    /// Like [`Template::render`], with `<placeholder of NODE>` for what is
    /// only known at run time (for `nodefall plan`).
    pub fn preview(&self, node: &str, value: impl Fn(&Var) -> Option<String>) -> String {
        let shown = |v: &Var| value(v).or_else(|| Some(format!("<{v} of {node}>")));
        match self.fill(shown, false) {
            Ok(cmd) => cmd.to_string(),
            Err(e) => format!("({e})"),
        }
    }
}

fn placeholder(inner: &str) -> Result<Placeholder, String> {
    let (name, last) = match inner.split_once('|') {
        Some((n, "last")) => (n, true),
        Some((_, f)) => {
            return Err(format!(
                "`|{f}` is not a filter: the only one is `|last` (the text after the last `/`)"
            ));
        }
        None => (inner, false),
    };
    let keyed = |k: &str, what: &str| {
        if k.is_empty() {
            Err(format!(
                "`{{{what}:}}` needs a key, e.g. `{{{what}:kubernetes.io/hostname}}`"
            ))
        } else {
            Ok(k.to_owned())
        }
    };
    let var = match name {
        "node" => Var::Node,
        "machine" => Var::Machine,
        "internalIP" => Var::InternalIp,
        "externalIP" => Var::ExternalIp,
        "hostname" => Var::Hostname,
        "systemUUID" => Var::SystemUuid,
        "providerID" => Var::ProviderId,
        _ => match name.split_once(':') {
            Some(("label", k)) => Var::Label(keyed(k, "label")?),
            Some(("annotation", k)) => Var::Annotation(keyed(k, "annotation")?),
            _ => {
                let known = [
                    "node",
                    "machine",
                    "internalIP",
                    "externalIP",
                    "hostname",
                    "systemUUID",
                    "providerID",
                ];
                let hint = crate::scenario::suggest::closest(name, known)
                    .map(|s| format!("did you mean `{{{s}}}`? "))
                    .unwrap_or_default();
                return Err(format!(
                    "`{{{inner}}}` is not a placeholder; {hint}known: {NAMES}; write `{{{{` for a \
                     literal brace"
                ));
            }
        },
    };
    Ok(Placeholder { var, last })
}

/// `value` as one shell word.
pub fn sh_quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@,+=%".contains(c));
    if plain {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(v: &Var) -> Option<String> {
        match v {
            Var::Node => Some("worker-1".into()),
            Var::Machine => Some("vm 101; rm -rf /".into()),
            Var::InternalIp => Some("10.0.0.5".into()),
            Var::ProviderId => Some("aws:///eu-west-1a/i-0abc".into()),
            Var::Label(k) if k == "bmc" => Some("10.9.0.5".into()),
            _ => None,
        }
    }

    fn render(text: &str, shell: bool) -> Cmd {
        Template::parse(text, shell).unwrap().render(facts).unwrap()
    }

    #[test]
    fn a_value_stays_one_argument_without_a_shell() {
        let cmd = render("qm suspend {machine}", false);
        assert_eq!(cmd.program, "qm");
        assert_eq!(cmd.args, ["suspend", "vm 101; rm -rf /"]);
        let cmd = render(
            r#"ipmitool -H "{label:bmc}" -U 'ad min' chassis\ power off"#,
            false,
        );
        assert_eq!(
            cmd.args,
            ["-H", "10.9.0.5", "-U", "ad min", "chassis power", "off"]
        );
        let cmd = render(
            "aws ec2 stop-instances --instance-ids {providerID|last}",
            false,
        );
        assert_eq!(cmd.args.last().map(String::as_str), Some("i-0abc"));
        let cmd = render(r#"curl -d '{{"ResetType": "ForceOff"}}' x"#, false);
        assert_eq!(cmd.args, ["-d", r#"{"ResetType": "ForceOff"}"#, "x"]);
        let cmd = render(r#"echo "a\"b" '' x"#, false);
        assert_eq!(cmd.args, ["a\"b", "", "x"]);
    }

    #[test]
    fn a_shell_never_parses_a_value() {
        let cmd = render("qm suspend {machine} && echo {node} >/dev/null", true);
        assert_eq!(cmd.program, "sh");
        assert_eq!(
            cmd.args,
            [
                "-c",
                "qm suspend \"${1}\" && echo \"${2}\" >/dev/null",
                "sh",
                "vm 101; rm -rf /",
                "worker-1"
            ]
        );
        let run = |cmd: Cmd| {
            let out = std::process::Command::new("sh")
                .args(&cmd.args)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        assert_eq!(
            run(render("printf '%s|' {machine} {node}", true)),
            "vm 101; rm -rf /|worker-1|"
        );
        // Where quoting would not hold: a heredoc, backticks, `$` before it.
        let evil = |v: &Var| match v {
            Var::Annotation(_) => Some("$(echo INJECTED)`echo INJECTED`".into()),
            v => facts(v),
        };
        for text in [
            "cat <<EOF\n{annotation:x}\nEOF",
            "echo `printf %s {annotation:x}`",
            "echo ${annotation:x}",
        ] {
            let out = run(Template::parse(text, true).unwrap().render(evil).unwrap());
            assert!(
                out.contains("$(echo INJECTED)") && !out.contains("INJECTED\n"),
                "{text}: {out}"
            );
        }
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn a_value_that_looks_like_an_option_is_refused() {
        let t = Template::parse("ssh {internalIP} true", false).unwrap();
        let e = t
            .render(|v| (*v == Var::InternalIp).then(|| "-oProxyCommand=id".to_owned()))
            .unwrap_err();
        assert!(e.to_string().contains("starts with `-`"), "{e}");
        let t = Template::parse("virsh \\\n  destroy {node}", false).unwrap();
        assert_eq!(t.render(facts).unwrap().args, ["destroy", "worker-1"]);
    }

    #[test]
    fn bad_templates_say_where_and_what_to_do() {
        let e = Template::parse("qm suspend {machin}", false).unwrap_err();
        assert_eq!(e.at, 12);
        assert!(e.message.contains("did you mean `{machine}`?"), "{e}");
        let e = Template::parse("curl -d '{\"a\": 1}'", false).unwrap_err();
        assert!(e.message.contains("write `{{`"), "{e}");
        let e = Template::parse("echo 'a", false).unwrap_err();
        assert!(e.message.contains("not closed"), "{e}");
        let e = Template::parse("echo '{node}'", true).unwrap_err();
        assert!(e.message.contains("inside quotes"), "{e}");
        let e = Template::parse("   ", false).unwrap_err();
        assert!(e.message.contains("empty"), "{e}");
        let e = Template::parse("x {label:}", false).unwrap_err();
        assert!(e.message.contains("needs a key"), "{e}");
        let e = Template::parse("x {node|first}", false).unwrap_err();
        assert!(e.message.contains("`|last`"), "{e}");
        assert!(Template::parse("echo }", false).is_err());
    }

    #[test]
    fn a_value_the_node_lacks_is_named_and_previews_show_placeholders() {
        let t = Template::parse("govc vm.power -off {externalIP}", false).unwrap();
        assert_eq!(
            t.render(facts),
            Err(Unfilled::Missing(Placeholder {
                var: Var::ExternalIp,
                last: false
            }))
        );
        assert_eq!(
            t.preview("worker-1", facts),
            "govc vm.power -off '<externalIP of worker-1>'"
        );
        assert!(t.placeholders().any(|p| p.var.is_node_address()));
    }
}
