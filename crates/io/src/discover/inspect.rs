//! An existing cluster, before anything touches it: which cluster it is
//! (checked against the scenario's `cluster:` pins) and its timing profile
//! (discovered, unless `--profile` says otherwise).

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::identity;
use crate::discover;
use crate::duration::format_duration;
use crate::profile::discovery;
use crate::profile::{ProfileName, TimingProfile, Var, ZoneRule};
use crate::scenario::model::ClusterPin;

/// Why an existing cluster could not be inspected.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}", match (.context, .file) {
        (Some(c), Some(f)) => format!("reading kubeconfig context `{c}` of {}", f.display()),
        (None, Some(f)) => format!("reading the current context of kubeconfig {}", f.display()),
        (Some(c), None) => format!("reading kubeconfig context `{c}` (KUBECONFIG or ~/.kube/config)"),
        (None, None) => "reading the current kubeconfig context (KUBECONFIG or ~/.kube/config)".into(),
    })]
    Kubeconfig {
        context: Option<String>,
        /// The kubeconfig file read (None: the default loading rules).
        file: Option<std::path::PathBuf>,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("building a kube client")]
    Client(#[source] crate::actions::ApiError),
    /// The cluster is not the one the scenario is pinned to (bad input).
    #[error(transparent)]
    Identity(#[from] identity::Error),
    #[error(transparent)]
    ProfileMismatch(#[from] ProfileMismatch),
}

impl Error {
    /// True when the scenario or the flags are at fault (exit 2).
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Error::Identity(_) | Error::ProfileMismatch(_))
    }
}

/// The kube config of a kubeconfig context (`None`: the current one) of
/// `file` (`None`: KUBECONFIG, then ~/.kube/config), and the context's name.
pub async fn kube_config(
    file: Option<&Path>,
    context: Option<String>,
) -> Result<(kube::Config, Option<String>), Error> {
    let (config, current) =
        load(file, context.clone())
            .await
            .map_err(|source| Error::Kubeconfig {
                context: context.clone(),
                file: file.map(Path::to_owned),
                source,
            })?;
    let current = match file {
        Some(_) => current,
        None => Kubeconfig::read().ok().and_then(|k| k.current_context),
    };
    Ok((config, context.or(current)))
}

/// The kube config of a kubeconfig file (`None`: KUBECONFIG, then
/// ~/.kube/config) and context (`None`: the file's current one).
pub async fn kube_config_at(
    kubeconfig: Option<&Path>,
    context: Option<String>,
) -> Result<kube::Config, String> {
    load(kubeconfig, context)
        .await
        .map(|(config, _)| config)
        .map_err(|e| e.to_string())
}

/// [`kube_config`]'s and [`kube_config_at`]'s loading; with a `file`, also
/// that file's current context.
async fn load(
    file: Option<&Path>,
    context: Option<String>,
) -> Result<(kube::Config, Option<String>), kube::config::KubeconfigError> {
    let options = KubeConfigOptions {
        context,
        ..KubeConfigOptions::default()
    };
    match file {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)?;
            let current = kc.current_context.clone();
            Ok((
                kube::Config::from_custom_kubeconfig(kc, &options).await?,
                current,
            ))
        }
        None => Ok((kube::Config::from_kubeconfig(&options).await?, None)),
    }
}

/// What an existing cluster is and what its timings are.
#[derive(Debug)]
pub struct Inspected {
    pub identity: identity::Identity,
    pub profile: TimingProfile,
    /// Remarks of the discovery (printed, and kept in the report).
    pub notes: Vec<String>,
}

/// `--profile` names timings the cluster is set to run otherwise (bad
/// input, exit 2: the run's windows would be wrong from the start).
#[derive(Debug, thiserror::Error)]
#[error(
    "--profile {profile} contradicts what this cluster runs:\n  - {}\n  drop --profile to use the \
     cluster's own timings, or set the value under the scenario's `timing:`; nothing was changed",
    .mismatches.join("\n  - ")
)]
pub struct ProfileMismatch {
    pub profile: ProfileName,
    pub mismatches: Vec<String>,
}

/// Reads the cluster's identity and checks it against `pins` (an error
/// there is bad input: exit 2, nothing touched), then its timings: what
/// discovery finds, or with `explicit` the named profile, refused
/// ([`ProfileMismatch`]) where it contradicts a discovered value.
pub async fn inspect(
    config: &kube::Config,
    context: Option<String>,
    pins: &[ClusterPin],
    explicit: Option<ProfileName>,
) -> Result<Inspected, Error> {
    let client = kube::Client::try_from(config.clone()).map_err(|e| Error::Client(e.into()))?;
    let server = config.cluster_url.to_string();
    let identity = identity::read(&client, context, &server).await;
    identity::check(pins, &identity)?;
    let found = discovery::build(&discover::read(&client).await);
    let (profile, notes) = match explicit {
        None => (found.profile, found.notes),
        Some(p) => {
            let named = TimingProfile::named(p).set_by(&format!("--profile {p}"));
            let differs = |v: &Var| {
                found.profile.origin(*v).word() == "discovered"
                    && found.profile.get(*v) != named.get(*v)
            };
            let say = |v: Var| {
                format!(
                    "{} is {} in `{p}`, {} on the cluster ({})",
                    v.alias().unwrap_or(v.name()),
                    format_duration(named.get(v)),
                    format_duration(found.profile.get(v)),
                    found.profile.origin(v).detail()
                )
            };
            // A value the cluster runs (a setting, or a flag left out of a
            // running component's pod) contradicts --profile: refused. One
            // only taken from the version's default because a ConfigMap
            // leaves it unset (the nodes may run otherwise) is said.
            let (set, defaults): (Vec<Var>, Vec<Var>) = Var::ALL
                .into_iter()
                .filter(differs)
                .partition(|v| discovery::set_on_the_cluster(&found.profile.origin(*v)));
            let mut mismatches: Vec<String> = set.into_iter().map(say).collect();
            // The zone rules that are not times, likewise.
            for rule in ZoneRule::ALL {
                let (ours, theirs) = (named.zones.value(rule), found.profile.zones.value(rule));
                let origin = found.profile.zone_origin(rule);
                if ours != theirs && discovery::set_on_the_cluster(&origin) {
                    mismatches.push(format!(
                        "{} is {ours} in `{p}`, {theirs} on the cluster ({})",
                        rule.name(),
                        origin.detail()
                    ));
                }
            }
            if !mismatches.is_empty() {
                return Err(ProfileMismatch {
                    profile: p,
                    mismatches,
                }
                .into());
            }
            let notes = defaults.into_iter().map(say).collect();
            (named, notes)
        }
    };
    Ok(Inspected {
        identity,
        profile,
        notes,
    })
}
