//! Manifests a scenario applies (`setup.apply`, `apply` actions), read and
//! checked at validate time the way `actions::apply_file` will read them, so
//! a broken manifest is refused before any fault, with `file:line:column`.
//! The parsed documents are kept ([`ManifestDoc`]) so a run knows exactly
//! which objects it applies.

use serde::Serialize;

use super::load::{Diagnostic, strip_bom, strip_positions};
use super::names;
use super::spans::{Pos, Spans};

/// The largest manifest file read, in bytes: 8 MiB (a bundle of big custom
/// resource definitions is a few MiB).
pub const MAX_MANIFEST_BYTES: u64 = 8 << 20;

/// The most documents (objects) one manifest may hold.
pub const MAX_DOCUMENTS: usize = 10_000;

/// Whether objects of a kind live in a namespace. Known for built-in kinds;
/// for others (custom resources) only the API server's discovery can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Scope {
    Namespaced,
    Cluster,
    Unknown,
}

/// One object of a manifest file.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestDoc {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// `metadata.namespace` as written (None when absent).
    pub namespace: Option<String>,
    pub scope: Scope,
    /// The manifest's path as shown in messages.
    pub file: String,
    /// 1-based index among the stream's documents (empty ones included).
    pub doc: usize,
    /// Line where the document's content starts.
    pub line: usize,
    /// The whole document.
    pub value: serde_json::Value,
}

impl ManifestDoc {
    /// Namespace the object ends up in when applied into `scenario_namespace`:
    /// `apply_file` sends namespaced kinds to that namespace (the API server
    /// refuses a different `metadata.namespace`) and cluster-scoped kinds to
    /// no namespace. For [`Scope::Unknown`] kinds this assumes namespaced.
    pub fn applied_namespace<'a>(&'a self, scenario_namespace: &'a str) -> Option<&'a str> {
        match self.scope {
            Scope::Cluster => None,
            Scope::Namespaced | Scope::Unknown => Some(scenario_namespace),
        }
    }

    /// `Kind/name`, as `apply_file` reports applied objects.
    pub fn object(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

/// How the API server checks `metadata.name` for a kind.
#[derive(Clone, Copy)]
enum NameRule {
    Label,
    Subdomain,
    /// RBAC objects: anything that is a valid URL path segment.
    PathSegment,
}

/// Built-in kinds by API group: scope and name rule. Kinds not listed are
/// left to the API server (custom resources, newer kinds).
const KINDS: &[(&str, &str, Scope, NameRule)] = {
    use NameRule::{Label, PathSegment, Subdomain};
    use Scope::{Cluster, Namespaced};
    &[
        ("", "ConfigMap", Namespaced, Subdomain),
        ("", "Endpoints", Namespaced, Subdomain),
        ("", "LimitRange", Namespaced, Subdomain),
        ("", "Namespace", Cluster, Label),
        ("", "Node", Cluster, Subdomain),
        ("", "PersistentVolume", Cluster, Subdomain),
        ("", "PersistentVolumeClaim", Namespaced, Subdomain),
        ("", "Pod", Namespaced, Subdomain),
        ("", "PodTemplate", Namespaced, Subdomain),
        ("", "ReplicationController", Namespaced, Subdomain),
        ("", "ResourceQuota", Namespaced, Subdomain),
        ("", "Secret", Namespaced, Subdomain),
        ("", "Service", Namespaced, Label),
        ("", "ServiceAccount", Namespaced, Subdomain),
        ("apps", "ControllerRevision", Namespaced, Subdomain),
        ("apps", "DaemonSet", Namespaced, Subdomain),
        ("apps", "Deployment", Namespaced, Subdomain),
        ("apps", "ReplicaSet", Namespaced, Subdomain),
        ("apps", "StatefulSet", Namespaced, Subdomain),
        (
            "autoscaling",
            "HorizontalPodAutoscaler",
            Namespaced,
            Subdomain,
        ),
        ("batch", "CronJob", Namespaced, Subdomain),
        ("batch", "Job", Namespaced, Subdomain),
        ("coordination.k8s.io", "Lease", Namespaced, Subdomain),
        ("discovery.k8s.io", "EndpointSlice", Namespaced, Subdomain),
        ("networking.k8s.io", "Ingress", Namespaced, Subdomain),
        ("networking.k8s.io", "IngressClass", Cluster, Subdomain),
        ("networking.k8s.io", "NetworkPolicy", Namespaced, Subdomain),
        ("policy", "PodDisruptionBudget", Namespaced, Subdomain),
        (
            "rbac.authorization.k8s.io",
            "ClusterRole",
            Cluster,
            PathSegment,
        ),
        (
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            Cluster,
            PathSegment,
        ),
        ("rbac.authorization.k8s.io", "Role", Namespaced, PathSegment),
        (
            "rbac.authorization.k8s.io",
            "RoleBinding",
            Namespaced,
            PathSegment,
        ),
        ("scheduling.k8s.io", "PriorityClass", Cluster, Subdomain),
        ("storage.k8s.io", "CSIDriver", Cluster, Subdomain),
        ("storage.k8s.io", "StorageClass", Cluster, Subdomain),
        ("storage.k8s.io", "VolumeAttachment", Cluster, Subdomain),
        (
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            Cluster,
            Subdomain,
        ),
    ]
};

fn kind_info(group: &str, kind: &str) -> Option<(Scope, NameRule)> {
    KINDS
        .iter()
        .find(|(g, k, ..)| *g == group && *k == kind)
        .map(|&(_, _, scope, rule)| (scope, rule))
}

/// A valid `apiVersion` is `VERSION` (core group) or `GROUP/VERSION`; returns the group.
fn api_group(api_version: &str) -> Option<&str> {
    match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [v] if !v.is_empty() => Some(""),
        [g, v] if !g.is_empty() && !v.is_empty() => Some(g),
        _ => None,
    }
}

fn path_segment(name: &str) -> Result<(), String> {
    if name == "." || name == ".." {
        return Err(format!("`{name}` may not be used as a name"));
    }
    match name.chars().find(|c| matches!(c, '/' | '%')) {
        Some(c) => Err(format!("a name may not contain `{c}`")),
        None => Ok(()),
    }
}

/// Collects problems with positions inside one manifest file.
struct Doc<'a> {
    file: &'a str,
    spans: &'a Spans,
    root: Option<Pos>,
    diags: Vec<Diagnostic>,
}

impl Doc<'_> {
    fn err(&mut self, path: &str, message: String, help: impl Into<Option<String>>) {
        // a field that is absent falls back to its parent, then to the document
        let pos = if path.is_empty() {
            self.root
        } else {
            self.spans.value(path).or(self.root)
        };
        self.diags.push(Diagnostic {
            file: self.file.to_string(),
            pos,
            message,
            help: help.into(),
        });
    }

    fn err_key(&mut self, path: &str, message: String, help: impl Into<Option<String>>) {
        let pos = self.spans.key(path).or(self.root);
        self.diags.push(Diagnostic {
            file: self.file.to_string(),
            pos,
            message,
            help: help.into(),
        });
    }

    /// A required string field; reports it missing, of the wrong type, or empty.
    fn string(
        &mut self,
        value: &serde_yaml_ng::Value,
        path: &str,
        what: &str,
        example: &str,
    ) -> Option<String> {
        let mut v = Some(value);
        for part in path.split('.') {
            v = v.and_then(|m| m.get(part));
        }
        let help = format!(
            "every object needs `apiVersion`, `kind` and `metadata.name`, e.g. `{example}`"
        );
        match v {
            None | Some(serde_yaml_ng::Value::Null) => {
                // point at the parent mapping when it exists, else the document
                let parent = path.rsplit_once('.').map_or("", |(p, _)| p);
                self.err(parent, format!("{what} has no `{path}`"), help);
                None
            }
            Some(serde_yaml_ng::Value::String(s)) if s.is_empty() => {
                self.err(path, format!("{what}: `{path}` is empty"), help);
                None
            }
            Some(serde_yaml_ng::Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.err(
                    path,
                    format!("{what}: `{path}` must be a string"),
                    Some(format!("quote it, e.g. `{example}`")),
                );
                None
            }
        }
    }
}

/// Reads every document of a manifest as `apply_file` would and checks what
/// the API server would refuse. `file` is the path used in messages. Returns
/// the objects, and the problems (empty when the manifest is fine).
pub fn parse(
    file: &str,
    text: &str,
    scenario_namespace: &str,
) -> (Vec<ManifestDoc>, Vec<Diagnostic>) {
    let text = strip_bom(text);
    let spans = Spans::index_documents(text);
    let none = Spans::default();
    let mut docs = Vec::new();
    let mut diags = Vec::new();
    for (i, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let n = i + 1;
        if n > MAX_DOCUMENTS {
            diags.push(Diagnostic {
                file: file.to_string(),
                pos: spans.get(i).and_then(|s| s.value("")),
                message: format!(
                    "the manifest has more than {MAX_DOCUMENTS} documents; nodefall reads no more"
                ),
                help: Some("split it into several files".into()),
            });
            break;
        }
        let spans = spans.get(i).unwrap_or(&none);
        let mut cx = Doc {
            file,
            spans,
            root: spans.value(""),
            diags: Vec::new(),
        };
        let value = match <serde_yaml_ng::Value as serde::Deserialize>::deserialize(de) {
            Ok(v) => v,
            Err(e) => {
                let pos = e.location().map(|l| Pos {
                    line: l.line(),
                    col: l.column(),
                });
                diags.push(Diagnostic {
                    file: file.to_string(),
                    pos: pos.or(cx.root),
                    message: format!(
                        "document {n} is not valid YAML: {}",
                        strip_positions(&e.to_string())
                    ),
                    help: Some("check indentation and quotes around this line".into()),
                });
                // the stream cannot be read past a syntax error (nor can apply_file)
                break;
            }
        };
        if let Some(doc) = check(&mut cx, n, &value, scenario_namespace) {
            docs.push(doc);
        }
        // a document's problems in the order they appear in it
        cx.diags.sort_by_key(|d| d.pos);
        diags.append(&mut cx.diags);
    }
    (docs, diags)
}

fn check(
    cx: &mut Doc<'_>,
    n: usize,
    value: &serde_yaml_ng::Value,
    ns: &str,
) -> Option<ManifestDoc> {
    if value.is_null() {
        return None; // an empty document: apply_file skips it too
    }
    if !value.is_mapping() {
        cx.err(
            "",
            format!("document {n} is not a Kubernetes object: expected a mapping"),
            Some("a document starts with `apiVersion:`, `kind:` and `metadata:`".into()),
        );
        return None;
    }
    let what = format!("document {n}");
    let api_version = cx.string(value, "apiVersion", &what, "apiVersion: apps/v1");
    let kind = cx.string(value, "kind", &what, "kind: Deployment");
    let metadata = value.get("metadata");
    let name = match metadata {
        Some(m) if !m.is_mapping() && !m.is_null() => {
            cx.err(
                "metadata",
                format!("{what}: `metadata` must be a mapping"),
                Some("e.g. `metadata: {name: web}`".into()),
            );
            None
        }
        _ => cx.string(value, "metadata.name", &what, "metadata: {name: web}"),
    };
    let mut group = None;
    if let Some(v) = &api_version {
        group = api_group(v);
        if group.is_none() {
            cx.err(
                "apiVersion",
                format!("{what}: `{v}` is not an apiVersion"),
                Some(
                    "write `VERSION` for the core group or `GROUP/VERSION`, e.g. `v1` or `apps/v1`"
                        .into(),
                ),
            );
        }
    }
    let info = group
        .zip(kind.as_deref())
        .and_then(|(g, k)| kind_info(g, k));
    let scope = info.map_or(Scope::Unknown, |(s, _)| s);
    let label = |name: &Option<String>, kind: &Option<String>| match (kind, name) {
        (Some(k), Some(n)) => format!("{k}/{n}"),
        (Some(k), None) => k.clone(),
        _ => what.clone(),
    };
    let object = label(&name, &kind);
    if let (Some(n), Some((_, rule))) = (&name, info) {
        let broken = match rule {
            NameRule::Label => names::dns1123_label(n).err().map(|e| e.to_string()),
            NameRule::Subdomain => names::dns1123_subdomain(n).err().map(|e| e.to_string()),
            NameRule::PathSegment => path_segment(n).err(),
        };
        if let Some(rule) = broken {
            cx.err(
                "metadata.name",
                format!("{object}: `{n}` is not a valid name: {rule}"),
                Some("e.g. `web` or `web-1`".into()),
            );
        }
    }
    let namespace = match metadata.and_then(|m| m.get("namespace")) {
        None | Some(serde_yaml_ng::Value::Null) => None,
        Some(serde_yaml_ng::Value::String(s)) => Some(s.clone()),
        Some(_) => {
            cx.err(
                "metadata.namespace",
                format!("{object}: `metadata.namespace` must be a string"),
                None,
            );
            None
        }
    };
    if let Some(other) = &namespace
        && scope == Scope::Namespaced
        && other != ns
    {
        cx.err(
            "metadata.namespace",
            format!(
                "{object} sets namespace `{other}`, but nodefall applies namespaced objects into the scenario namespace `{ns}`; the API server refuses the mismatch"
            ),
            Some(format!(
                "remove `metadata.namespace` (or set it to `{ns}`)"
            )),
        );
    }
    labels(cx, metadata, &object);
    let json = match serde_json::to_value(value) {
        Ok(j) => Some(j),
        Err(e) => {
            cx.err(
                "",
                format!("{object} cannot be sent as JSON: {e}"),
                Some("mapping keys must be strings".into()),
            );
            None
        }
    };
    Some(ManifestDoc {
        api_version: api_version?,
        kind: kind?,
        name: name?,
        namespace,
        scope,
        file: cx.file.to_string(),
        doc: n,
        line: cx.root.map_or(1, |p| p.line),
        value: json?,
    })
    .filter(|_| cx.diags.is_empty())
}

/// `metadata.labels`: keys are qualified names, values label values.
fn labels(cx: &mut Doc<'_>, metadata: Option<&serde_yaml_ng::Value>, object: &str) {
    let Some(labels) = metadata.and_then(|m| m.get("labels")) else {
        return;
    };
    let Some(map) = labels.as_mapping() else {
        if !labels.is_null() {
            cx.err(
                "metadata.labels",
                format!("{object}: `metadata.labels` must be a mapping"),
                None,
            );
        }
        return;
    };
    for (k, v) in map {
        let (Some(key), value) = (k.as_str(), v) else {
            continue; // not a string: reported when converting to JSON
        };
        let path = format!("metadata.labels.{key}");
        if let Err(e) = names::qualified_name(key) {
            cx.err_key(
                &path,
                format!("{object}: label key `{key}` is not valid: {e}"),
                Some("e.g. `app` or `app.kubernetes.io/name`".into()),
            );
        }
        let problem = match value {
            serde_yaml_ng::Value::String(s) => names::label_value(s)
                .err()
                .map(|e| format!("{object}: label `{key}` has an invalid value `{s}`: {e}")),
            _ => Some(format!("{object}: label `{key}` must have a string value")),
        };
        if let Some(message) = problem {
            cx.err(
                &path,
                message,
                Some("e.g. `web`, `\"1\"` (quoted) or `\"\"`".into()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(text: &str) -> Vec<String> {
        parse("m.yaml", text, "ns")
            .1
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn reads_every_object_of_a_stream() {
        let text = "\u{feff}# web\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: other\n";
        let (docs, diags) = parse("m.yaml", text, "ns");
        assert!(diags.is_empty(), "{diags:?}");
        let got: Vec<(String, usize, usize, Scope, Option<&str>)> = docs
            .iter()
            .map(|d| {
                (
                    d.object(),
                    d.doc,
                    d.line,
                    d.scope,
                    d.applied_namespace("ns"),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("Deployment/web".into(), 1, 2, Scope::Namespaced, Some("ns")),
                ("Namespace/other".into(), 3, 7, Scope::Cluster, None),
            ]
        );
        assert_eq!(docs[0].value["metadata"]["name"], "web");
        assert_eq!(docs[0].api_version, "apps/v1");
    }

    #[test]
    fn missing_fields_name_the_document_and_line() {
        let e = errs(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata:\n  labels: {}\n",
        );
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(
            e[0].starts_with("m.yaml:5:1: document 2 has no `kind`"),
            "{e:?}"
        );
        assert!(
            e[1].starts_with("m.yaml:7:3: document 2 has no `metadata.name`"),
            "{e:?}"
        );
    }

    #[test]
    fn wrong_types_and_shapes_are_refused() {
        let e = errs("- a\n---\napiVersion: apps/v1/x\nkind: 3\nmetadata: {name: 42}\n");
        assert!(
            e[0].starts_with("m.yaml:1:3: document 1 is not a Kubernetes object"),
            "{e:?}"
        );
        assert!(
            e[1].starts_with("m.yaml:3:13: document 2: `apps/v1/x` is not an apiVersion"),
            "{e:?}"
        );
        assert!(
            e[2].starts_with("m.yaml:4:7: document 2: `kind` must be a string"),
            "{e:?}"
        );
        assert!(
            e[3].starts_with("m.yaml:5:18: document 2: `metadata.name` must be a string"),
            "{e:?}"
        );
    }

    #[test]
    fn a_namespaced_object_may_not_name_another_namespace() {
        let ok = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: 'system:x', namespace: elsewhere}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: elsewhere}\n";
        assert_eq!(errs(ok), Vec::<String>::new());
        let e = errs(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n",
        );
        assert!(
            e[0].starts_with("m.yaml:5:14: Deployment/web sets namespace `default`, but nodefall applies namespaced objects into the scenario namespace `ns`"),
            "{e:?}"
        );
    }

    #[test]
    fn names_and_labels_follow_the_api_rules() {
        let e = errs(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web.svc\n  labels: {'bad key!!': x, app: -web, n: 1}\n",
        );
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(
            e[0].starts_with("m.yaml:4:9: Service/web.svc: `web.svc` is not a valid name"),
            "{e:?}"
        );
        assert!(e[1].contains("label key `bad key!!` is not valid"), "{e:?}");
        assert!(
            e[2].contains("label `app` has an invalid value `-web`"),
            "{e:?}"
        );
        assert!(e[3].contains("label `n` must have a string value"), "{e:?}");
    }

    #[test]
    fn a_syntax_error_stops_the_stream_with_its_position() {
        let e = errs("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("m.yaml:4:1: document 1 is not valid YAML"),
            "{e:?}"
        );
    }

    #[test]
    fn empty_files_and_comments_have_no_objects() {
        for text in ["", "\n", "# only a comment\n", "---\n", "---\n...\n"] {
            let (docs, diags) = parse("m.yaml", text, "ns");
            assert!(docs.is_empty() && diags.is_empty(), "{text:?}: {diags:?}");
        }
    }
}
