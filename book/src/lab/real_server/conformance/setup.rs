//! What a server needs before a scenario: a namespace, and the book's two CRDs (`Widget` with
//! the status subresource, `PlainWidget` without), established: applied on a real server
//! ([`install_crds`]), POSTed to the embedded one, which refuses server-side apply
//! (`rig::widget::install_widgets`).

use std::time::Duration;

use k8s_openapi::{
    api::core::v1::Namespace,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};

use super::error::ConformanceError;
use crate::lab::rig::widget;

fn failed(step: &str, source: kube::Error) -> ConformanceError {
    ConformanceError::Send {
        scenario: "setup".into(),
        step: step.into(),
        source,
    }
}

/// Applies both CRDs (server-side apply, so a second run changes nothing) and waits until
/// both are established and served.
pub async fn install_crds(client: &kube::Client) -> Result<(), ConformanceError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("controlloop-conformance").force();
    for crd in widget::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(|e| failed("install the CRDs", e))?;
    }
    for name in [
        "widgets.lab.controlloop.dev",
        "plainwidgets.lab.controlloop.dev",
    ] {
        until(&format!("CRD {name} established"), || async {
            let crd = crds.get(name).await.ok()?;
            crd.status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(())
        })
        .await?;
    }
    // Established is not yet served by every handler: list both until they answer.
    for plural in ["widgets", "plainwidgets"] {
        until(&format!("{plural} served"), || async {
            let path = format!("/apis/lab.controlloop.dev/v1/{plural}");
            let req = http::Request::get(&path).body(Vec::new()).ok()?;
            client.request_text(req).await.ok().map(|_| ())
        })
        .await?;
    }
    Ok(())
}

/// How long the CRDs may take to be established and served.
const SETUP_LIMIT: Duration = Duration::from_secs(60);

/// Polls `ready` every 100 ms until it gives `Some`, for at most [`SETUP_LIMIT`].
async fn until<F, Fut>(step: &str, mut ready: F) -> Result<(), ConformanceError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<()>>,
{
    let deadline = tokio::time::Instant::now() + SETUP_LIMIT;
    while ready().await.is_none() {
        if tokio::time::Instant::now() > deadline {
            return Err(ConformanceError::Hung {
                scenario: "setup".into(),
                step: step.into(),
                limit: SETUP_LIMIT,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Creates namespace `name` (an existing one is fine).
pub async fn namespace(client: &kube::Client, name: &str) -> Result<(), ConformanceError> {
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    match nss.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(failed("create the namespace", e)),
    }
}

/// Deletes namespace `name` (the namespace controller removes what is left in it).
pub async fn delete_namespace(client: &kube::Client, name: &str) {
    let nss: Api<Namespace> = Api::all(client.clone());
    let _ = nss.delete(name, &DeleteParams::default()).await;
}
