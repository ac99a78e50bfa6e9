//! The sim describes itself the way kubeadm does: a `kubeadm-config`
//! ConfigMap (`ClusterConfiguration`, v1beta4 `extraArgs` lists) of the
//! flags its kube-apiserver and kube-controller-manager really run with, and
//! a `kubelet-config` ConfigMap of its node agents' lease duration. A sim
//! cluster opened as an existing cluster is then discovered like any other
//! (see [`crate::discover`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};

use crate::discover::{KUBE_SYSTEM, KUBEADM_CONFIG, KUBELET_CONFIG};
use crate::profile::flags;

/// The `ClusterConfiguration` document of the given command lines.
pub fn cluster_configuration(version: &str, api_server: &[String], kcm: &[String]) -> String {
    let list = |args: &[String]| -> serde_yaml_ng::Value {
        let items = flags::command_line(args)
            .into_iter()
            .map(|(name, value)| {
                let mut m = serde_yaml_ng::Mapping::new();
                m.insert("name".into(), name.into());
                m.insert("value".into(), value.into());
                serde_yaml_ng::Value::Mapping(m)
            })
            .collect();
        let mut section = serde_yaml_ng::Mapping::new();
        section.insert("extraArgs".into(), serde_yaml_ng::Value::Sequence(items));
        serde_yaml_ng::Value::Mapping(section)
    };
    let mut doc = serde_yaml_ng::Mapping::new();
    doc.insert("apiVersion".into(), "kubeadm.k8s.io/v1beta4".into());
    doc.insert("kind".into(), "ClusterConfiguration".into());
    doc.insert("clusterName".into(), "nodefall-sim".into());
    doc.insert("kubernetesVersion".into(), version.into());
    doc.insert("apiServer".into(), list(api_server));
    doc.insert("controllerManager".into(), list(kcm));
    serde_yaml_ng::to_string(&serde_yaml_ng::Value::Mapping(doc)).unwrap_or_default()
}

/// The `KubeletConfiguration` document of the node agents.
pub fn kubelet_configuration(lease_seconds: u64) -> String {
    format!(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         nodeLeaseDurationSeconds: {lease_seconds}\n"
    )
}

fn config_map(name: &str, key: &str, text: String) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(KUBE_SYSTEM.to_owned()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                "nodefall-sim".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(key.to_owned(), text)])),
        ..ConfigMap::default()
    }
}

/// Writes both ConfigMaps (server-side apply: the same on every start).
pub async fn publish(
    client: &kube::Client,
    cluster_configuration: String,
    kubelet_configuration: String,
) -> Result<(), kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), KUBE_SYSTEM);
    let pp = PatchParams::apply("nodefall-sim").force();
    for cm in [
        config_map(
            KUBEADM_CONFIG,
            "ClusterConfiguration",
            cluster_configuration,
        ),
        config_map(KUBELET_CONFIG, "kubelet", kubelet_configuration),
    ] {
        let name = cm.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &pp, &Patch::Apply(&cm)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Var;
    use crate::profile::flags::{Component, settings};

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_published_configuration_reads_back_as_its_flags() {
        let api = words(
            "--secure-port 6443 --default-unreachable-toleration-seconds 20 --allow-privileged=true",
        );
        let kcm =
            words("--node-monitor-grace-period 8s --node-monitor-period 1s --leader-elect=false");
        let text = cluster_configuration("v1.33.1", &api, &kcm);
        let c = flags::cluster_configuration(&text).unwrap();
        assert_eq!(c.version.as_deref(), Some("v1.33.1"));
        assert_eq!(c.api_server["allow-privileged"], "true");
        let (found, _) = settings(Component::ControllerManager, &c.controller_manager);
        assert_eq!(found[0].var, Var::NodeMonitorGracePeriod);
        assert_eq!(found[0].value.as_secs(), 8);
        let (found, _) = settings(Component::ApiServer, &c.api_server);
        assert_eq!(found[0].value.as_secs(), 20);
        let k = flags::kubelet_configuration(&kubelet_configuration(4)).unwrap();
        let (found, _) = settings(Component::Kubelet, &k);
        assert_eq!(found[0].value.as_secs(), 4);
    }
}
