//! Kubernetes' own rules for names, label keys and values, taint keys and
//! effects (k8s.io/apimachinery/pkg/util/validation), so a scenario is refused
//! at validate time rather than by the API server after a fault is injected.

/// Why a string is not a valid Kubernetes name of some sort. `Display` states
/// the rule that was broken, in upstream's words where they are clear.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("it must not be empty")]
    Empty,
    #[error("it is {len} characters long; at most {max} are allowed")]
    TooLong { len: usize, max: usize },
    #[error(
        "it must consist of alphanumeric characters, `-`, `_` or `.`, and must start and end with an alphanumeric character"
    )]
    NotQualifiedName,
    #[error(
        "a label value must be empty or consist of alphanumeric characters, `-`, `_` or `.`, and must start and end with an alphanumeric character"
    )]
    NotLabelValue,
    #[error(
        "it must consist of lowercase letters, digits and `-`, and must start and end with a letter or digit (RFC 1123 label)"
    )]
    NotDns1123Label,
    #[error(
        "it must consist of lowercase letters, digits, `-` and `.`, with each dot-separated part starting and ending with a letter or digit (RFC 1123 subdomain)"
    )]
    NotDns1123Subdomain,
    #[error("the name part (after `/`) is not valid: {0}")]
    Name(Box<NameError>),
    #[error("the prefix (before `/`) must not be empty")]
    EmptyPrefix,
    #[error("the prefix (before `/`) must be a DNS subdomain: {0}")]
    Prefix(Box<NameError>),
    #[error("it has more than one `/`; write an optional DNS-subdomain prefix, `/`, and a name")]
    TooManySlashes,
}

/// Longest name part of a qualified name, label value, and DNS-1123 label.
pub const MAX_NAME: usize = 63;
/// Longest DNS-1123 subdomain (and so qualified-name prefix).
pub const MAX_SUBDOMAIN: usize = 253;

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, without a length limit.
fn qualified_shape(s: &str) -> bool {
    s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

fn length(s: &str, max: usize) -> Result<(), NameError> {
    match s.len() {
        0 => Err(NameError::Empty),
        len if len > max => Err(NameError::TooLong { len, max }),
        _ => Ok(()),
    }
}

/// An RFC 1123 label: namespaces, most object names that must fit DNS.
pub fn dns1123_label(s: &str) -> Result<(), NameError> {
    length(s, MAX_NAME)?;
    let lower = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if s.starts_with(lower) && s.ends_with(lower) && s.chars().all(|c| lower(c) || c == '-') {
        Ok(())
    } else {
        Err(NameError::NotDns1123Label)
    }
}

/// An RFC 1123 subdomain: dot-separated labels, at most 253 characters.
pub fn dns1123_subdomain(s: &str) -> Result<(), NameError> {
    length(s, MAX_SUBDOMAIN)?;
    let lower = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = s.split('.').all(|part| {
        part.starts_with(lower)
            && part.ends_with(lower)
            && part.chars().all(|c| lower(c) || c == '-')
    });
    if ok {
        Ok(())
    } else {
        Err(NameError::NotDns1123Subdomain)
    }
}

/// A qualified name (label key, taint key, annotation key): an optional
/// DNS-subdomain prefix and `/`, then a name of at most 63 characters.
pub fn qualified_name(s: &str) -> Result<(), NameError> {
    if s.is_empty() {
        return Err(NameError::Empty);
    }
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Err(NameError::EmptyPrefix);
            }
            dns1123_subdomain(prefix).map_err(|e| NameError::Prefix(Box::new(e)))?;
            name
        }
        _ => return Err(NameError::TooManySlashes),
    };
    let name_rule = length(name, MAX_NAME).and_then(|()| {
        if qualified_shape(name) {
            Ok(())
        } else {
            Err(NameError::NotQualifiedName)
        }
    });
    match name_rule {
        Ok(()) => Ok(()),
        // without a prefix the name is the whole key: no need to say "name part"
        Err(e) if !s.contains('/') => Err(e),
        Err(e) => Err(NameError::Name(Box::new(e))),
    }
}

/// A label value (and a taint value): empty, or up to 63 characters of the
/// qualified-name alphabet starting and ending with an alphanumeric.
pub fn label_value(s: &str) -> Result<(), NameError> {
    if s.len() > MAX_NAME {
        return Err(NameError::TooLong {
            len: s.len(),
            max: MAX_NAME,
        });
    }
    if s.is_empty() || qualified_shape(s) {
        Ok(())
    } else {
        Err(NameError::NotLabelValue)
    }
}

/// The namespaces every cluster has and needs: nodefall never runs in one
/// (it creates, changes and force-deletes objects in its namespace, and
/// deletes the namespace on cleanup when the run created it) and never
/// deletes one (`delete-namespace`).
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Whether `ns` is one of [`SYSTEM_NAMESPACES`]: the one rule for the
/// scenario's own namespace and for `delete-namespace`.
pub fn is_system_namespace(ns: &str) -> bool {
    SYSTEM_NAMESPACES.contains(&ns)
}

/// `8-4-4-4-12` hex digits.
pub fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// A MAC in canonical form, or None when it is not one.
pub fn normal_mac(s: &str) -> Option<String> {
    let parts: Vec<&str> = s.split(':').collect();
    (parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit())))
    .then(|| s.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_follow_apimachinery() {
        for good in [
            "a",
            "A",
            "dedicated",
            "my.name",
            "123-abc",
            "MyName",
            "a_b",
            "example.com/maintenance",
            "node-role.kubernetes.io/control-plane",
            "node.kubernetes.io/unreachable",
            &"x".repeat(63),
            &format!("{}/{}", "a".repeat(253), "b".repeat(63)),
        ] {
            assert_eq!(qualified_name(good), Ok(()), "{good:?}");
        }
        let cases: [(&str, NameError); 12] = [
            ("", NameError::Empty),
            ("bad key!!", NameError::NotQualifiedName),
            ("-a", NameError::NotQualifiedName),
            ("a-", NameError::NotQualifiedName),
            ("a b", NameError::NotQualifiedName),
            ("é", NameError::NotQualifiedName),
            (&"x".repeat(64), NameError::TooLong { len: 64, max: 63 }),
            ("/a", NameError::EmptyPrefix),
            ("a/b/c", NameError::TooManySlashes),
            (
                "Example.com/a",
                NameError::Prefix(Box::new(NameError::NotDns1123Subdomain)),
            ),
            ("example.com/", NameError::Name(Box::new(NameError::Empty))),
            (
                "example.com/_x",
                NameError::Name(Box::new(NameError::NotQualifiedName)),
            ),
        ];
        for (bad, want) in cases {
            assert_eq!(qualified_name(bad), Err(want), "{bad:?}");
        }
        let long_prefix = format!("{}/a", "a".repeat(254));
        assert_eq!(
            qualified_name(&long_prefix),
            Err(NameError::Prefix(Box::new(NameError::TooLong {
                len: 254,
                max: 253
            })))
        );
        assert_eq!(
            qualified_name("a..b/c"),
            Err(NameError::Prefix(Box::new(NameError::NotDns1123Subdomain)))
        );
    }

    #[test]
    fn label_values_may_be_empty_but_not_ragged() {
        for good in [
            "",
            "a",
            "MyValue",
            "my_value",
            "12345",
            "a.b-c_d",
            &"v".repeat(63),
        ] {
            assert_eq!(label_value(good), Ok(()), "{good:?}");
        }
        for bad in ["-a", "a-", "_", "a b", "a/b", "true!"] {
            assert_eq!(label_value(bad), Err(NameError::NotLabelValue), "{bad:?}");
        }
        assert_eq!(
            label_value(&"v".repeat(64)),
            Err(NameError::TooLong { len: 64, max: 63 })
        );
    }

    #[test]
    fn dns_labels_and_subdomains() {
        assert_eq!(dns1123_label("ns-1"), Ok(()));
        assert_eq!(dns1123_label("Ns"), Err(NameError::NotDns1123Label));
        assert_eq!(dns1123_label("a.b"), Err(NameError::NotDns1123Label));
        assert_eq!(dns1123_label("-a"), Err(NameError::NotDns1123Label));
        assert_eq!(dns1123_label(""), Err(NameError::Empty));
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            Err(NameError::TooLong { len: 64, max: 63 })
        );
        assert_eq!(dns1123_subdomain("web.example-1.com"), Ok(()));
        assert_eq!(
            dns1123_subdomain("a..b"),
            Err(NameError::NotDns1123Subdomain)
        );
        assert_eq!(
            dns1123_subdomain("a_b"),
            Err(NameError::NotDns1123Subdomain)
        );
    }
}
