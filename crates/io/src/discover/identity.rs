//! Which cluster a run is about to touch (kubeconfig context, API server
//! URL, the `kube-system` namespace's UID), and whether the scenario's
//! `cluster:` pins allow it. Checked before anything changes.

use std::fmt;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;

use crate::scenario::model::ClusterPin;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "this scenario may only run against {pins}, but this cluster is {identity}; nothing was changed"
    )]
    NotPinned { pins: String, identity: String },
}

/// What a cluster is called and answers to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// The kubeconfig context used (none: an in-cluster or ad-hoc config).
    pub context: Option<String>,
    pub server: String,
    /// `kube-system`'s UID; `None` when it could not be read.
    pub uid: Option<String>,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.context {
            Some(c) => write!(f, "context `{c}`, ")?,
            None => f.write_str("no context, ")?,
        }
        write!(f, "server {}, uid ", self.server)?;
        match &self.uid {
            Some(u) => f.write_str(u),
            None => f.write_str("unreadable"),
        }
    }
}

/// Reads the identity of the cluster behind `client`.
pub async fn read(client: &kube::Client, context: Option<String>, server: &str) -> Identity {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let uid = namespaces
        .get_opt("kube-system")
        .await
        .ok()
        .flatten()
        .and_then(|ns| ns.metadata.uid);
    Identity {
        context,
        server: server.to_owned(),
        uid,
    }
}

fn same_url(a: &str, b: &str) -> bool {
    a.trim_end_matches('/')
        .eq_ignore_ascii_case(b.trim_end_matches('/'))
}

/// Whether `pin` names the cluster `id`: every field it gives matches.
pub fn matches(pin: &ClusterPin, id: &Identity) -> bool {
    pin.context
        .as_ref()
        .is_none_or(|c| id.context.as_ref() == Some(c))
        && pin.server.as_ref().is_none_or(|s| same_url(s, &id.server))
        && pin
            .uid
            .as_ref()
            .is_none_or(|u| id.uid.as_ref().is_some_and(|x| x.eq_ignore_ascii_case(u)))
}

/// A pin in words: `context `kind-nodefall``, `server https://…`.
pub fn describe(pin: &ClusterPin) -> String {
    let mut parts = Vec::new();
    if let Some(c) = &pin.context {
        parts.push(format!("context `{c}`"));
    }
    if let Some(s) = &pin.server {
        parts.push(format!("server {s}"));
    }
    if let Some(u) = &pin.uid {
        parts.push(format!("uid {u}"));
    }
    parts.join(" and ")
}

/// Ok when there are no pins or one of them names the cluster.
pub fn check(pins: &[ClusterPin], id: &Identity) -> Result<(), Error> {
    if pins.is_empty() || pins.iter().any(|p| matches(p, id)) {
        return Ok(());
    }
    Err(Error::NotPinned {
        pins: pins.iter().map(describe).collect::<Vec<_>>().join(", or "),
        identity: id.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> Identity {
        Identity {
            context: Some("kind-nodefall".into()),
            server: "https://127.0.0.1:40123/".into(),
            uid: Some("7d3c9a51-1f2e-4b6d-8c0a-9e5f4b2d1a63".into()),
        }
    }

    fn pin(context: Option<&str>, server: Option<&str>, uid: Option<&str>) -> ClusterPin {
        ClusterPin {
            context: context.map(Into::into),
            server: server.map(Into::into),
            uid: uid.map(Into::into),
        }
    }

    #[test]
    fn every_given_field_must_match() {
        assert!(check(&[], &id()).is_ok());
        assert!(check(&[pin(Some("kind-nodefall"), None, None)], &id()).is_ok());
        assert!(check(&[pin(None, Some("https://127.0.0.1:40123"), None)], &id()).is_ok());
        assert!(
            check(
                &[pin(
                    None,
                    None,
                    Some("7D3C9A51-1F2E-4B6D-8C0A-9E5F4B2D1A63")
                )],
                &id()
            )
            .is_ok()
        );
        let both = pin(Some("kind-nodefall"), Some("https://10.0.0.1:6443"), None);
        let e = check(&[both], &id()).unwrap_err().to_string();
        assert_eq!(
            e,
            "this scenario may only run against context `kind-nodefall` and server \
             https://10.0.0.1:6443, but this cluster is context `kind-nodefall`, server \
             https://127.0.0.1:40123/, uid 7d3c9a51-1f2e-4b6d-8c0a-9e5f4b2d1a63; nothing was changed"
        );
    }

    #[test]
    fn any_pin_of_several_allows_and_an_unreadable_uid_never_matches() {
        let pins = [
            pin(Some("prod"), None, None),
            pin(Some("kind-nodefall"), None, None),
        ];
        assert!(check(&pins, &id()).is_ok());
        let mut unreadable = id();
        unreadable.uid = None;
        let e = check(
            &[pin(
                None,
                None,
                Some("7d3c9a51-1f2e-4b6d-8c0a-9e5f4b2d1a63"),
            )],
            &unreadable,
        );
        assert!(e.unwrap_err().to_string().contains("uid unreadable"));
    }
}
