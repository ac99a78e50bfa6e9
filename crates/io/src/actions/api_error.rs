//! A Kubernetes API call's failure in words: the one place that turns
//! kube-rs' errors into text. kube-rs' own `Display` of an API server's
//! answer (`kube::Error::Api`) appends the whole `Status` struct with
//! `{:?}` (`ApiError: ... (Status { status: Some(Failure), code: 422, ...`),
//! and a failed auth exec plugin prints its `std::process::Output` the same
//! way; here both become a sentence:
//!
//! `the API server refused it (422 Invalid): Service "web" is invalid; field
//! spec.ports[0].nodePort: Invalid value: 99999: provided port is not in the
//! valid range. The range of valid ports is 30000-32767 (FieldValueInvalid)`
//!
//! Every error that wraps a kube-rs error holds an [`ApiError`] (its
//! `#[source]`), never the `kube::Error` itself, and text made from a
//! watcher's or a wait's error goes through [`text`].

use std::error::Error as StdError;
use std::fmt;

use kube::client::AuthError;
use kube::core::Status;
use kube::core::response::StatusCause;

/// A kube-rs error (an API call's, a watcher's, a wait's) whose `Display`
/// is [`text`]: the API server's answer as a sentence, other failures with
/// their causes. It exposes no `source()`: its text already holds the causes,
/// and the kube-rs error behind it would print its `Debug` dump again.
pub struct ApiError(Box<dyn StdError + Send + Sync>);

impl From<kube::Error> for ApiError {
    fn from(e: kube::Error) -> ApiError {
        ApiError(Box::new(e))
    }
}

impl From<kube::runtime::watcher::Error> for ApiError {
    fn from(e: kube::runtime::watcher::Error) -> ApiError {
        ApiError(Box::new(e))
    }
}

impl From<kube::runtime::wait::Error> for ApiError {
    fn from(e: kube::runtime::wait::Error) -> ApiError {
        ApiError(Box::new(e))
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e: &(dyn StdError + 'static) = self.0.as_ref();
        f.write_str(&text(e))
    }
}

impl fmt::Debug for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ApiError").field(&self.to_string()).finish()
    }
}

impl StdError for ApiError {}

/// An error and its causes as one line, as `errors::chain` writes it, with
/// the API server's answers and failed auth plugins in words: a cause whose
/// text its wrapper already spells out (kube-rs' `"...: {0}"`) is put in its
/// place in our words, any other is appended after `: `.
pub fn text(e: &(dyn StdError + 'static)) -> String {
    if let Some(words) = own_words(e) {
        return words;
    }
    let mut s = e.to_string();
    let Some(cause) = e.source() else {
        return s;
    };
    let said = cause.to_string();
    let ours = text(cause);
    if !said.is_empty() && s.contains(&said) {
        s = s.replacen(&said, &ours, 1);
    } else if !s.contains(&ours) {
        s.push_str(": ");
        s.push_str(&ours);
    }
    s
}

/// The errors whose own `Display` prints a struct with `{:?}`, in words.
fn own_words(e: &(dyn StdError + 'static)) -> Option<String> {
    if let Some(kube::Error::Api(s)) = e.downcast_ref::<kube::Error>() {
        return Some(status_text(s));
    }
    // kube-rs boxes it (`WatchError(#[source] Box<Status>)`).
    if let Some(s) = e.downcast_ref::<Box<Status>>() {
        return Some(status_text(s));
    }
    if let Some(s) = e.downcast_ref::<Status>() {
        return Some(status_text(s));
    }
    if let Some(AuthError::AuthExecRun { cmd, out }) = e.downcast_ref::<AuthError>() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.trim();
        let mut s = format!("auth exec command '{cmd}' failed ({})", out.status);
        if !stderr.is_empty() {
            s.push_str(": ");
            s.push_str(stderr);
        }
        return Some(s);
    }
    None
}

/// The API server's answer as a sentence: `the API server refused it (CODE
/// REASON): MESSAGE` (HTTP's name of the code when the server gave no
/// reason), then each field cause the message does not already
/// spell out as `; field FIELD: MESSAGE (REASON)` (`; MESSAGE (REASON)`
/// without a field), then `; retry after Ns` when the server said so. A
/// message that spells out every field cause (`Service "web" is invalid: [a:
/// ..., b: ...]`) keeps only its head, and the causes follow one by one.
fn status_text(s: &Status) -> String {
    let mut out = String::from("the API server refused it");
    // No reason (an eviction's 500): HTTP's own name of the code.
    let http = http::StatusCode::from_u16(s.code)
        .ok()
        .and_then(|c| c.canonical_reason())
        .unwrap_or("");
    match (s.code, s.reason.trim()) {
        (0, "") => {}
        (0, reason) => out.push_str(&format!(" ({reason})")),
        (code, "") if http.is_empty() => out.push_str(&format!(" ({code})")),
        (code, "") => out.push_str(&format!(" ({code} {http})")),
        (code, reason) => out.push_str(&format!(" ({code} {reason})")),
    }
    let causes: Vec<&StatusCause> = s
        .details
        .iter()
        .flat_map(|d| &d.causes)
        .filter(|c| !said(c).is_empty())
        .collect();
    let mut message = s.message.trim();
    // `KIND "NAME" is invalid: [FIELD: MESSAGE, ...]`: each field once, below.
    let spelled: Option<Vec<usize>> = causes
        .iter()
        .map(|c| (!c.field.trim().is_empty()).then(|| message.find(&said(c)))?)
        .collect();
    if let Some(first) = spelled.and_then(|at| at.into_iter().min()) {
        let head = message[..first].trim_end_matches([' ', ':', '[']);
        if !head.is_empty() {
            message = head;
        }
    }
    if !message.is_empty() {
        out.push_str(": ");
        out.push_str(message.trim_end_matches('.'));
    }
    for c in causes {
        let cause = said(c);
        if message.contains(&cause) {
            continue;
        }
        out.push_str("; ");
        if !c.field.trim().is_empty() {
            out.push_str("field ");
        }
        out.push_str(cause.trim_end_matches('.'));
        if !c.reason.trim().is_empty() {
            out.push_str(&format!(" ({})", c.reason.trim()));
        }
    }
    if let Some(after) = s.details.as_ref().map(|d| d.retry_after_seconds)
        && after > 0
    {
        out.push_str(&format!("; retry after {after}s"));
    }
    out
}

/// A cause as the API server writes it into a message: `field: message`.
fn said(c: &StatusCause) -> String {
    match (c.field.trim(), c.message.trim()) {
        ("", m) => m.to_owned(),
        (f, "") => f.to_owned(),
        (f, m) => format!("{f}: {m}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(json: serde_json::Value) -> Status {
        serde_json::from_value(json).unwrap()
    }

    fn api(json: serde_json::Value) -> ApiError {
        kube::Error::Api(Box::new(status(json))).into()
    }

    /// No struct dump of any kind: `Some(`, `{ `, `Status {`.
    fn no_dump(s: &str) {
        for dump in ["Some(", "{ ", "Status {", "ListMeta", "Output {"] {
            assert!(!s.contains(dump), "`{dump}` in: {s}");
        }
    }

    /// The text as `errors::chain` writes it at a wrapping site.
    fn chained(e: ApiError) -> String {
        #[derive(Debug, thiserror::Error)]
        #[error("applying Service ns/web")]
        struct Site(#[source] ApiError);
        let s = crate::errors::chain(&Site(e));
        no_dump(&s);
        s
    }

    #[test]
    fn a_422_with_two_field_causes_names_each_field_once() {
        let e = api(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Service \"web\" is invalid: [spec.ports[0].nodePort: Invalid value: 99999: provided port is not in the valid range. The range of valid ports is 30000-32767, spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive]",
            "reason": "Invalid",
            "details": {"name": "web", "kind": "Service", "causes": [
                {"reason": "FieldValueInvalid", "message": "Invalid value: 99999: provided port is not in the valid range. The range of valid ports is 30000-32767", "field": "spec.ports[0].nodePort"},
                {"reason": "FieldValueInvalid", "message": "Invalid value: 0: must be between 1 and 65535, inclusive", "field": "spec.ports[0].port"}
            ]},
            "code": 422
        }));
        assert_eq!(
            chained(e),
            "applying Service ns/web: the API server refused it (422 Invalid): Service \"web\" is \
             invalid; field spec.ports[0].nodePort: Invalid value: 99999: provided port is not in \
             the valid range. The range of valid ports is 30000-32767 (FieldValueInvalid); field \
             spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive \
             (FieldValueInvalid)"
        );
    }

    #[test]
    fn causes_the_message_does_not_spell_out_follow_it() {
        let e = api(serde_json::json!({
            "status": "Failure", "message": "Service \"web\" is invalid", "reason": "Invalid",
            "details": {"causes": [
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.ports"},
                {"reason": "FieldValueNotSupported", "field": "spec.type"}
            ]},
            "code": 422
        }));
        assert_eq!(
            e.to_string(),
            "the API server refused it (422 Invalid): Service \"web\" is invalid; field \
             spec.ports: Required value (FieldValueRequired); field spec.type \
             (FieldValueNotSupported)"
        );
    }

    #[test]
    fn a_404() {
        let e = api(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "nodes \"ghost\" not found", "reason": "NotFound",
            "details": {"name": "ghost", "kind": "nodes"}, "code": 404
        }));
        assert_eq!(
            chained(e),
            "applying Service ns/web: the API server refused it (404 NotFound): nodes \"ghost\" \
             not found"
        );
    }

    #[test]
    fn a_409_conflict() {
        let e = api(serde_json::json!({
            "status": "Failure",
            "message": "Operation cannot be fulfilled on nodes \"worker-1\": the object has been modified; please apply your changes to the latest version and try again",
            "reason": "Conflict", "details": {"name": "worker-1", "kind": "nodes"}, "code": 409
        }));
        assert_eq!(
            e.to_string(),
            "the API server refused it (409 Conflict): Operation cannot be fulfilled on nodes \
             \"worker-1\": the object has been modified; please apply your changes to the latest \
             version and try again"
        );
    }

    #[test]
    fn a_429_names_the_budget_and_when_to_retry() {
        let e = api(serde_json::json!({
            "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}], "retryAfterSeconds": 10},
            "code": 429
        }));
        assert_eq!(
            chained(e),
            "applying Service ns/web: the API server refused it (429 TooManyRequests): Cannot \
             evict pod as it would violate the pod's disruption budget; The disruption budget \
             web needs 2 healthy pods and has 2 currently (DisruptionBudget); retry after 10s"
        );
    }

    #[test]
    fn a_cause_that_is_the_whole_message_is_said_once() {
        let e = api(serde_json::json!({
            "status": "Failure",
            "message": "Internal error occurred: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            "reason": "InternalError",
            "details": {"causes": [{"message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}]},
            "code": 500
        }));
        assert_eq!(
            e.to_string(),
            "the API server refused it (500 InternalError): Internal error occurred: This pod has \
             more than one PodDisruptionBudget, which the eviction subresource does not support"
        );
    }

    #[test]
    fn an_answer_without_reason_is_named_by_its_code() {
        assert_eq!(
            api(serde_json::json!({"code": 503})).to_string(),
            "the API server refused it (503 Service Unavailable)"
        );
        assert_eq!(
            api(serde_json::json!({"code": 599, "message": "odd"})).to_string(),
            "the API server refused it (599): odd"
        );
        // The eviction API's answer to a pod under two budgets, as it comes.
        let e = api(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            "code": 500
        }));
        assert_eq!(
            chained(e),
            "applying Service ns/web: the API server refused it (500 Internal Server Error): This \
             pod has more than one PodDisruptionBudget, which the eviction subresource does not \
             support"
        );
    }

    #[test]
    fn a_non_api_error_reads_as_kube_says_it() {
        let utf8 = String::from_utf8(vec![0xff]).unwrap_err();
        assert_eq!(
            chained(kube::Error::FromUtf8(utf8).into()),
            "applying Service ns/web: UTF-8 Error: invalid utf-8 sequence of 1 bytes from index 0"
        );
        assert_eq!(
            ApiError::from(kube::Error::TlsRequired).to_string(),
            "TLS required but no TLS stack selected"
        );
    }

    #[test]
    fn a_failed_auth_plugin_shows_its_stderr_not_its_output_struct() {
        use std::os::unix::process::ExitStatusExt as _;
        let run = || AuthError::AuthExecRun {
            cmd: "aws eks get-token".into(),
            out: Box::new(std::process::Output {
                status: std::process::ExitStatus::from_raw(256),
                stdout: b"secret".to_vec(),
                stderr: b"Unable to locate credentials\n".to_vec(),
            }),
        };
        let want = "auth exec command 'aws eks get-token' failed (exit status: 1): Unable to \
                    locate credentials";
        assert_eq!(
            chained(kube::Error::Auth(run()).into()),
            format!("applying Service ns/web: auth error: {want}")
        );
        // As the client's middleware hands it over: boxed in a service error.
        let s = chained(kube::Error::Service(Box::new(run())).into());
        assert_eq!(s, format!("applying Service ns/web: ServiceError: {want}"));
        assert!(!s.contains("secret"), "{s}");
    }

    #[test]
    fn a_watch_or_wait_that_failed_on_an_answer_reads_as_a_sentence() {
        let forbidden = || {
            kube::Error::Api(Box::new(status(serde_json::json!({
                "status": "Failure",
                "message": "serviceaccounts \"default\" is forbidden: User \"x\" cannot watch resource \"serviceaccounts\"",
                "reason": "Forbidden", "details": {"name": "default", "kind": "serviceaccounts"},
                "code": 403
            }))))
        };
        let want = "failed to perform initial object list: the API server refused it (403 \
                    Forbidden): serviceaccounts \"default\" is forbidden: User \"x\" cannot \
                    watch resource \"serviceaccounts\"";
        let watch = kube::runtime::watcher::Error::InitialListFailed(forbidden());
        assert_eq!(ApiError::from(watch).to_string(), want);
        let wait = kube::runtime::wait::Error::ProbeFailed(
            kube::runtime::watcher::Error::InitialListFailed(forbidden()),
        );
        assert_eq!(
            chained(wait.into()),
            format!(
                "applying Service ns/web: failed to probe for whether the condition is fulfilled \
                 yet: {want}"
            )
        );
        let gone = kube::runtime::watcher::Error::WatchError(Box::new(status(serde_json::json!({
            "status": "Failure", "message": "too old resource version: 5 (9)",
            "reason": "Expired", "code": 410
        }))));
        assert_eq!(
            ApiError::from(gone).to_string(),
            "error returned by apiserver during watch: the API server refused it (410 Expired): \
             too old resource version: 5 (9)"
        );
    }

    #[test]
    fn debug_is_the_sentence_too() {
        let e = api(serde_json::json!({"message": "nope", "reason": "Forbidden", "code": 403}));
        let d = format!("{e:?}");
        assert_eq!(
            d,
            "ApiError(\"the API server refused it (403 Forbidden): nope\")"
        );
    }
}
