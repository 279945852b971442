//! Jobs (`batch/v1`; kubernetes v1.37.2 `pkg/apis/batch/v1/defaults.go`,
//! `pkg/registry/batch/job/strategy.go`, `pkg/apis/batch/validation/validation.go`).
//!
//! The status subresource; a generation that bumps with the spec; `SetDefaults_Job` and the
//! template's defaults; on create, unless `manualSelector`, the selector generated from the
//! Job's uid and the template labelled with it and the Job's name (both the `batch.kubernetes.io/`
//! labels and the legacy ones), the Job labelled as its template when it has no labels of its
//! own (defaults run again when upstream reads the stored Job back), and an empty status. The
//! template's restart policy is `OnFailure` or `Never`; the selector, the template, the
//! completion mode and the completions do not change.
//!
//! # Differences from upstream
//! - The template is immutable whole; upstream lets a suspended Job's scheduling directives
//!   (node affinity, node selector, tolerations, labels, annotations, scheduling gates)
//!   change, and an indexed Job's completions change with its parallelism.
//! - A selector the client sets without `manualSelector` is not checked against the
//!   generated labels.

use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

use super::super::kinds::Kind;
use super::super::validation::ReasonedCause;
use super::pod;
use super::shared::{defaulted, immutable, non_negative, or_default, selector_and_template};
use crate::apiserver::schema::Cause;
use crate::apiserver::strategy::Hooks;

pub(super) fn kinds() -> Vec<Kind> {
    vec![Kind {
        status_subresource: true,
        tracks_generation: true,
        hooks: Some(&JOB),
        ..Kind::base("batch", "Job", "jobs", &[], |v| {
            defaulted::<Job>(v, job_defaults)
        })
    }]
}

static JOB: Hooks = Hooks {
    validate: validate_job,
    validate_update: job_update,
    prepare_for_create: job_create,
    ..Hooks::NONE
};

/// `SetDefaults_Job` and the template's.
fn job_defaults(j: &mut Value) {
    if !j["spec"].is_object() {
        j["spec"] = json!({});
    }
    let s = &mut j["spec"];
    if s["completions"].is_null() && s["parallelism"].is_null() {
        s["completions"] = json!(1);
    }
    or_default(s, "parallelism", json!(1));
    let backoff = if s["backoffLimitPerIndex"].is_null() {
        json!(6)
    } else {
        json!(i32::MAX)
    };
    or_default(s, "backoffLimit", backoff);
    or_default(s, "completionMode", json!("NonIndexed"));
    or_default(s, "suspend", json!(false));
    let replacement = if s["podFailurePolicy"].is_null() {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    or_default(s, "podReplacementPolicy", json!(replacement));
    or_default(s, "manualSelector", json!(false));
    pod::template_defaults(&mut s["template"]);
    labels_from_template(j);
}

/// A Job without labels takes its template's.
fn labels_from_template(j: &mut Value) {
    let labels = j["spec"]["template"]["metadata"]["labels"].clone();
    let has_own = j["metadata"]["labels"]
        .as_object()
        .is_some_and(|m| !m.is_empty());
    if labels.is_object() && !has_own {
        j["metadata"]["labels"] = labels;
    }
}

/// The labels a generated selector puts on the template: the job's name and uid, each under
/// its current and its legacy key.
const NAME_LABELS: [&str; 2] = ["job-name", "batch.kubernetes.io/job-name"];
const UID_LABELS: [&str; 2] = ["controller-uid", "batch.kubernetes.io/controller-uid"];

/// `PrepareForCreate`: the generated selector (unless manual), an empty status, and the
/// labels upstream's read-back defaulting gives.
fn job_create(j: &mut Value) {
    if j["spec"]["manualSelector"] != Value::Bool(true) {
        let name = j["metadata"]["name"].clone();
        let uid = j["metadata"]["uid"].clone();
        let t = &mut j["spec"]["template"]["metadata"];
        if !t["labels"].is_object() {
            t["labels"] = json!({});
        }
        for (keys, value) in [(NAME_LABELS, &name), (UID_LABELS, &uid)] {
            for k in keys {
                or_default(&mut t["labels"], k, value.clone());
            }
        }
        let s = &mut j["spec"];
        if !s["selector"].is_object() {
            s["selector"] = json!({});
        }
        if !s["selector"]["matchLabels"].is_object() {
            s["selector"]["matchLabels"] = json!({});
        }
        or_default(&mut s["selector"]["matchLabels"], UID_LABELS[1], uid);
    }
    j["status"] = json!({});
    labels_from_template(j);
}

fn validate_job(j: &Value, causes: &mut Vec<Cause>) {
    let s = &j["spec"];
    if s["manualSelector"] == Value::Bool(true) {
        selector_and_template(s, causes);
    }
    for f in [
        "spec.parallelism",
        "spec.completions",
        "spec.backoffLimit",
        "spec.activeDeadlineSeconds",
    ] {
        non_negative(j, f, causes);
    }
    pod::validate_spec(
        &s["template"]["spec"],
        "spec.template.spec",
        &["OnFailure", "Never"],
        causes,
    );
    // `ValidateJobSpec` answers a restart policy it refuses as a required one.
    for c in causes.iter_mut() {
        if c.0 == "spec.template.spec.restartPolicy" {
            *c = (
                c.0.clone(),
                "FieldValueRequired",
                r#"Required value: valid values: "OnFailure", "Never""#.into(),
            );
        }
    }
}

/// `ValidateJobSpecUpdate`'s immutable fields.
fn job_update(new: &Value, old: &Value, causes: &mut Vec<ReasonedCause>) {
    for f in [
        "spec.completions",
        "spec.selector",
        "spec.template",
        "spec.completionMode",
    ] {
        immutable(new, old, f, causes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_gets_its_selector_and_labels_from_its_uid() {
        let mut j = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}});
        job_defaults(&mut j);
        j["metadata"]["uid"] = json!("u");
        job_create(&mut j);
        assert_eq!(
            j["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}})
        );
        assert_eq!(j["metadata"]["labels"]["job-name"], "j");
        assert_eq!(
            j["spec"]["template"]["metadata"]["labels"]["controller-uid"],
            "u"
        );
        assert_eq!(j["spec"]["backoffLimit"], 6);
        assert_eq!(j["status"], json!({}));
    }
}
