//! The API's wire: request paths and queries parsed, selectors matched,
//! merge patches applied, responses and `Status` errors written.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::{Body, Key, Target};

/// `api/v1/namespaces/ns/pods/name/eviction` and the like, parsed.
pub(super) fn target(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (gv, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (format!("api/{v}"), rest),
        ["apis", g, v, rest @ ..] => (format!("apis/{g}/{v}"), rest),
        _ => return None,
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_owned()), rest),
        _ => (None, rest),
    };
    let (resource, name, sub) = match rest {
        [r] => (*r, None, None),
        [r, n] => (*r, Some(*n), None),
        [r, n, s] => (*r, Some(*n), Some(*s)),
        _ => return None,
    };
    Some(Target {
        gv,
        resource: resource.to_owned(),
        ns,
        name: name.map(str::to_owned),
        sub: sub.map(str::to_owned),
    })
}

pub(super) fn key(t: &Target, name: String) -> Key {
    Key {
        gv: t.gv.clone(),
        resource: t.resource.clone(),
        ns: t.ns.clone(),
        name,
    }
}

/// Whether an object belongs in a list or watch of `t` with these selectors.
pub(super) fn listed(
    t: &Target,
    k: &Key,
    object: &Value,
    query: &BTreeMap<String, String>,
) -> bool {
    let labels = &object["metadata"]["labels"];
    let by_label = query.get("labelSelector").is_none_or(|sel| {
        sel.split(',')
            .filter(|c| !c.is_empty())
            .all(|c| match c.split_once('=') {
                Some((l, v)) => labels[l.trim_end_matches('=')].as_str() == Some(v),
                None => !labels[c].is_null(),
            })
    });
    let by_field = query.get("fieldSelector").is_none_or(|sel| {
        sel.split(',')
            .filter(|c| !c.is_empty())
            .all(|c| match c.split_once('=') {
                Some(("metadata.name", v)) => k.name == v.trim_start_matches('='),
                Some(("metadata.namespace", v)) => {
                    k.ns.as_deref() == Some(v.trim_start_matches('='))
                }
                Some(("spec.nodeName", v)) => {
                    object["spec"]["nodeName"].as_str() == Some(v.trim_start_matches('='))
                }
                _ => true,
            })
    });
    k.gv == t.gv
        && k.resource == t.resource
        && (t.ns.is_none() || k.ns == t.ns)
        && by_label
        && by_field
}

/// RFC 7386: objects merge key by key, `null` removes, the rest replaces.
pub(super) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(t) = target else {
        return;
    };
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

pub(super) fn query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// Percent-decoding (`+` is a space) of a query's parts.
pub(super) fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn respond(code: StatusCode, body: &Value) -> Response<Body> {
    let mut r = Response::new(BodyExt::boxed(Full::new(Bytes::from(body.to_string()))));
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

pub(super) fn ok(body: &Value) -> Response<Body> {
    respond(StatusCode::OK, body)
}

pub(super) fn created(body: &Value) -> Response<Body> {
    respond(StatusCode::CREATED, body)
}

pub(super) fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    respond(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code.as_u16()}),
    )
}

pub(super) fn not_found(t: &Target) -> Response<Body> {
    let name = t.name.clone().unwrap_or_default();
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{} \"{name}\" not found", t.resource),
    )
}
