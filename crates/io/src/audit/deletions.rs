//! Who deleted what, from the API server's audit log: a deletion writes no
//! field, so no field manager names its author; the log does (the user and
//! the user agent of the request). Node deletions, and pods deleted with no
//! grace period (force deletions), for the remediation's acts.

use std::io::Read as _;
use std::path::Path;

use jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;

use super::Error;
use crate::record::remediation::AuditDeletion;
use crate::timeline::Ms;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    stage: String,
    verb: String,
    #[serde(default)]
    object_ref: Option<ObjectRefJson>,
    #[serde(default)]
    user: Option<User>,
    #[serde(default)]
    user_agent: Option<String>,
    #[serde(default)]
    response_status: Option<Status>,
    #[serde(default)]
    request_object: Option<Value>,
    stage_timestamp: Timestamp,
}

#[derive(Debug, Deserialize)]
struct ObjectRefJson {
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    subresource: Option<String>,
}

#[derive(Debug, Deserialize)]
struct User {
    #[serde(default)]
    username: String,
}

#[derive(Debug, Deserialize)]
struct Status {
    #[serde(default)]
    code: Option<u16>,
}

/// The Node deletions and pod force deletions the audit log at `path` (and
/// the files it was rotated into) recorded, `at` ms after `started`.
pub fn read(path: &Path, started: Timestamp) -> Result<Vec<AuditDeletion>, Error> {
    let mut out = Vec::new();
    for file in super::with_rotated(path) {
        let mut text = String::new();
        std::fs::File::open(&file)
            .and_then(|mut f| f.read_to_string(&mut text))
            .map_err(|source| Error::Read {
                path: file.clone(),
                source,
            })?;
        super::json_lines(
            text.as_bytes(),
            &file,
            |path, line, source| Error::Parse { path, line, source },
            |_, e: Event| {
                out.extend(deletion(e, started));
                Ok(())
            },
        )?;
    }
    out.sort_by_key(|d| d.at);
    Ok(out)
}

fn deletion(e: Event, started: Timestamp) -> Option<AuditDeletion> {
    let done = e.stage == "ResponseComplete"
        && e.verb == "delete"
        && e.response_status
            .as_ref()
            .and_then(|s| s.code)
            .is_some_and(|c| (200..300).contains(&c));
    let r = e.object_ref?;
    let resource = r.resource?;
    if !done || r.subresource.is_some() || !matches!(resource.as_str(), "nodes" | "pods") {
        return None;
    }
    // DeleteOptions: a pod deleted with gracePeriodSeconds 0 is forced
    let force = e
        .request_object
        .as_ref()
        .and_then(|o| o.get("gracePeriodSeconds"))
        .and_then(Value::as_i64)
        == Some(0);
    let at = e.stage_timestamp.duration_since(started).as_millis();
    Some(AuditDeletion {
        at: Ms::try_from(at).unwrap_or(Ms::MAX),
        resource,
        namespace: r.namespace,
        name: r.name?,
        user: e.user.map(|u| u.username).unwrap_or_default(),
        agent: e.user_agent,
        force,
    })
}
