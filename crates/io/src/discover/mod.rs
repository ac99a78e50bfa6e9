//! Timing discovery: the timing profile of a cluster nodefall did not start,
//! built from what the cluster says about itself. Read-only and best effort:
//! [`read`] asks for the server version, the control-plane mirror pods'
//! command lines (what really runs), kubeadm's `kubeadm-config` and
//! `kubelet-config` ConfigMaps (what was configured); the model crate's
//! `profile::discovery::build` makes the profile of what was found (each
//! value keeps where it came from; what could not be read stays the
//! upstream default, marked assumed, so a window that depends on it can say
//! so).

pub mod identity;
pub mod inspect;
pub mod nodes;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams};

use crate::profile::discovery::{Findings, FlagSource, MIRROR_POD, POD};
use crate::profile::flags::{self, Component};

/// The namespace and names kubeadm uses.
pub const KUBE_SYSTEM: &str = "kube-system";
pub const KUBEADM_CONFIG: &str = "kubeadm-config";
pub const KUBELET_CONFIG: &str = "kubelet-config";

/// Reads what the cluster says about its timings. Never fails: what cannot
/// be read is a problem in the findings, and its values stay assumed.
pub async fn read(client: &kube::Client) -> Findings {
    let mut f = Findings::default();
    match client.apiserver_version().await {
        Ok(v) => f.version = Some(v.git_version),
        Err(e) => f.problems.push(format!("server version: {}", short(&e))),
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), KUBE_SYSTEM);
    for c in [Component::ControllerManager, Component::ApiServer] {
        let Some(label) = c.pod_label() else { continue };
        let lp = ListParams::default().labels(&format!("component={label}"));
        match pods.list(&lp).await {
            Ok(list) => {
                let mut items = list.items;
                items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
                f.sources
                    .extend(items.iter().filter_map(|p| mirror_pod(c, p)));
            }
            Err(e) => f
                .problems
                .push(format!("{} pods in {KUBE_SYSTEM}: {}", c.name(), short(&e))),
        }
    }
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), KUBE_SYSTEM);
    match maps.get_opt(KUBEADM_CONFIG).await {
        Ok(Some(cm)) => match config_map_text(&cm, "ClusterConfiguration") {
            Some(text) => match flags::cluster_configuration(text) {
                Ok(cc) => {
                    let from = format!("ConfigMap {KUBE_SYSTEM}/{KUBEADM_CONFIG}");
                    if f.version.is_none() {
                        f.version = cc.version.clone();
                    }
                    f.sources.push(FlagSource {
                        component: Component::ControllerManager,
                        from: from.clone(),
                        flags: cc.controller_manager,
                    });
                    f.sources.push(FlagSource {
                        component: Component::ApiServer,
                        from,
                        flags: cc.api_server,
                    });
                }
                Err(e) => f
                    .problems
                    .push(format!("{KUBEADM_CONFIG}: ClusterConfiguration: {e}")),
            },
            None => f
                .problems
                .push(format!("{KUBEADM_CONFIG} has no ClusterConfiguration")),
        },
        Ok(None) => {}
        Err(e) => f.problems.push(format!("{KUBEADM_CONFIG}: {}", short(&e))),
    }
    match maps.get_opt(KUBELET_CONFIG).await {
        Ok(Some(cm)) => {
            if let Some(text) = config_map_text(&cm, "kubelet") {
                match flags::kubelet_configuration(text) {
                    Ok(flags) => f.sources.push(FlagSource {
                        component: Component::Kubelet,
                        from: format!("ConfigMap {KUBE_SYSTEM}/{KUBELET_CONFIG}"),
                        flags,
                    }),
                    Err(e) => f.problems.push(format!("{KUBELET_CONFIG}: {e}")),
                }
            }
        }
        Ok(None) => {}
        Err(e) => f.problems.push(format!("{KUBELET_CONFIG}: {}", short(&e))),
    }
    // mirror pods first: they run; the ConfigMaps only say what was asked
    f.sources.sort_by_key(|s| s.from.starts_with("ConfigMap"));
    f
}

fn config_map_text<'a>(cm: &'a ConfigMap, key: &str) -> Option<&'a str> {
    cm.data.as_ref()?.get(key).map(String::as_str)
}

/// The flags of a control-plane component's mirror pod (a static pod the
/// kubelet mirrors into the API), from its container's command and args.
fn mirror_pod(c: Component, p: &Pod) -> Option<FlagSource> {
    let is_mirror = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let spec = p.spec.as_ref()?;
    let container = spec
        .containers
        .iter()
        .find(|x| x.name == c.name())
        .or_else(|| spec.containers.first())?;
    let words: Vec<String> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .cloned()
        .collect();
    let name = p.metadata.name.clone().unwrap_or_default();
    Some(FlagSource {
        component: c,
        from: format!(
            "{} {KUBE_SYSTEM}/{name}",
            if is_mirror { MIRROR_POD } else { POD }
        ),
        flags: flags::command_line(&words),
    })
}

/// A kube error in a few words (`forbidden`, `not found`, or the message).
fn short(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => "forbidden (RBAC)".into(),
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => crate::actions::api_text(other),
    }
}
