//! Who deleted what, from the API server's audit log: a deletion writes no
//! field, so no field manager names its author; the log does (the user and
//! the user agent of the request). Node deletions, and pods deleted with no
//! grace period (force deletions), for the remediation's acts.

use std::io::BufRead as _;
use std::path::Path;

use jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;

use super::Error;
use super::log::{ObjectRefJson, StatusJson};
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
    response_status: Option<StatusJson>,
    #[serde(default)]
    request_object: Option<Value>,
    stage_timestamp: Timestamp,
}

#[derive(Debug, Deserialize)]
struct User {
    #[serde(default)]
    username: String,
}

/// The Node deletions and pod force deletions the audit log at `path` (and
/// the files it was rotated into) recorded, `at` ms after `started`.
pub fn read(path: &Path, started: Timestamp) -> Result<Vec<AuditDeletion>, Error> {
    let mut out = Vec::new();
    for file in super::with_rotated(path) {
        let read_error = |source| Error::Read {
            path: file.clone(),
            source,
        };
        let reader = std::io::BufReader::new(std::fs::File::open(&file).map_err(read_error)?);
        for (i, line) in reader.lines().enumerate() {
            let line = line.map_err(read_error)?;
            // Most events are not deletions: not parsed (the log of a large
            // run holds hundreds of thousands of writes).
            if !line.contains("\"delete\"") {
                continue;
            }
            let e: Event = serde_json::from_str(&line).map_err(|source| Error::Parse {
                path: file.clone(),
                line: i + 1,
                source,
            })?;
            out.extend(deletion(e, started));
        }
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

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "test helpers fail the test by panicking"
    )]

    use super::*;

    /// Audit events as the sim's API server writes them (trimmed).
    const LOG: &str = concat!(
        r#"{"kind":"Event","stage":"ResponseComplete","verb":"delete","objectRef":{"resource":"nodes","name":"w1"},"user":{"username":"nodefall-admin"},"userAgent":"nodefall/0.1","responseStatus":{"code":200},"stageTimestamp":"2026-11-27T04:00:10.250000Z"}"#,
        "\n",
        r#"{"kind":"Event","stage":"ResponseComplete","verb":"delete","objectRef":{"resource":"pods","namespace":"ns","name":"db-0"},"user":{"username":"nodefall-admin"},"responseStatus":{"code":200},"requestObject":{"kind":"DeleteOptions","gracePeriodSeconds":0},"stageTimestamp":"2026-11-27T04:00:05Z"}"#,
        "\n",
        r#"{"kind":"Event","stage":"ResponseComplete","verb":"delete","objectRef":{"resource":"pods","namespace":"ns","name":"db-1"},"user":{"username":"nodefall-admin"},"responseStatus":{"code":200},"stageTimestamp":"2026-11-27T04:00:06Z"}"#,
        "\n",
        r#"{"kind":"Event","stage":"ResponseComplete","verb":"delete","objectRef":{"resource":"pods","namespace":"ns","name":"gone"},"user":{"username":"nodefall-admin"},"responseStatus":{"code":404},"stageTimestamp":"2026-11-27T04:00:07Z"}"#,
        "\n",
        r#"{"kind":"Event","stage":"ResponseComplete","verb":"update","objectRef":{"resource":"nodes","name":"w1"},"user":{"username":"x"},"responseStatus":{"code":200},"stageTimestamp":"2026-11-27T04:00:08Z"}"#,
        "\n",
    );

    #[test]
    fn deletions_with_their_authors_force_deletions_marked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, LOG).unwrap();
        let started: Timestamp = "2026-11-27T04:00:00Z".parse().unwrap();
        let d = read(&path, started).unwrap();
        let seen: Vec<(Ms, &str, &str, bool, String)> = d
            .iter()
            .map(|d| {
                (
                    d.at,
                    d.resource.as_str(),
                    d.name.as_str(),
                    d.force,
                    d.author(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (5_000, "pods", "db-0", true, "nodefall-admin".to_owned()),
                (6_000, "pods", "db-1", false, "nodefall-admin".to_owned()),
                (
                    10_250,
                    "nodes",
                    "w1",
                    false,
                    "nodefall-admin (nodefall/0.1)".to_owned()
                ),
            ]
        );
    }
}
