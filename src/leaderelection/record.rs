//! The leader election record and its Lease form (kubernetes/client-go v0.37.2
//! `tools/leaderelection/resourcelock/interface.go` and `leaselock.go`).

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// What a lock holds: who leads, since when, until when it must be renewed. The times are
/// informational: an elector never compares them with its own clock (module invariant I1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderElectionRecord {
    /// The holder's identity; empty when nobody holds the lock (after a release).
    pub holder_identity: String,
    /// How long, in whole seconds, others must observe the record unchanged before taking it.
    pub lease_duration_seconds: i64,
    /// When the holder acquired it (`None`: Go's zero time).
    pub acquire_time: Option<Timestamp>,
    /// When the holder last renewed it.
    pub renew_time: Option<Timestamp>,
    /// How many times the lock changed holders.
    pub leader_transitions: i64,
    /// Coordinated leader election's strategy; empty when not coordinated.
    pub strategy: String,
    /// Coordinated leader election's "end of term" mark: another holder is preferred.
    pub preferred_holder: String,
}

impl LeaderElectionRecord {
    /// The record as upstream's lock returns it raw: its JSON, times at whole seconds (Go's
    /// `metav1.Time`), field order as upstream's struct. Electors compare these bytes to tell a
    /// renewed record from an unchanged one, so two renewals within one second look the same.
    pub fn raw(&self) -> Vec<u8> {
        let time = |t: &Option<Timestamp>| match t {
            Some(t) => serde_json::Value::String(
                Timestamp::from_second(t.as_second())
                    .unwrap_or(*t)
                    .strftime("%Y-%m-%dT%H:%M:%SZ")
                    .to_string(),
            ),
            None => serde_json::Value::Null,
        };
        // Built by hand to keep upstream's field order (serde_json's map sorts its keys).
        let fields: [(&str, serde_json::Value); 7] = [
            ("holderIdentity", self.holder_identity.clone().into()),
            ("leaseDurationSeconds", self.lease_duration_seconds.into()),
            ("acquireTime", time(&self.acquire_time)),
            ("renewTime", time(&self.renew_time)),
            ("leaderTransitions", self.leader_transitions.into()),
            ("strategy", self.strategy.clone().into()),
            ("preferredHolder", self.preferred_holder.clone().into()),
        ];
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", body.join(",")).into_bytes()
    }
}

/// A Lease's spec as a record (`LeaseSpecToLeaderElectionRecord`): absent fields are empty.
pub fn lease_spec_to_leader_election_record(spec: &LeaseSpec) -> LeaderElectionRecord {
    LeaderElectionRecord {
        holder_identity: spec.holder_identity.clone().unwrap_or_default(),
        lease_duration_seconds: spec.lease_duration_seconds.map_or(0, i64::from),
        acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
        renew_time: spec.renew_time.as_ref().map(|t| t.0),
        leader_transitions: spec.lease_transitions.map_or(0, i64::from),
        strategy: spec.strategy.clone().unwrap_or_default(),
        preferred_holder: spec.preferred_holder.clone().unwrap_or_default(),
    }
}

/// A record as a Lease's spec (`LeaderElectionRecordToLeaseSpec`): the holder, duration, times
/// and transitions always set; strategy and preferred holder only when not empty. Counts
/// beyond `i32` saturate (upstream's conversion wraps).
pub fn leader_election_record_to_lease_spec(record: &LeaderElectionRecord) -> LeaseSpec {
    let int32 = |n: i64| i32::try_from(n).unwrap_or(if n < 0 { i32::MIN } else { i32::MAX });
    let non_empty = |s: &String| (!s.is_empty()).then(|| s.clone());
    LeaseSpec {
        holder_identity: Some(record.holder_identity.clone()),
        lease_duration_seconds: Some(int32(record.lease_duration_seconds)),
        acquire_time: record.acquire_time.map(MicroTime),
        renew_time: record.renew_time.map(MicroTime),
        lease_transitions: Some(int32(record.leader_transitions)),
        strategy: non_empty(&record.strategy),
        preferred_holder: non_empty(&record.preferred_holder),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_raw_record_is_upstreams_json_at_whole_seconds() {
        let t = Timestamp::from_second(1_700_000_000).unwrap();
        let r = LeaderElectionRecord {
            holder_identity: "a".into(),
            lease_duration_seconds: 15,
            acquire_time: Some(t),
            renew_time: Some(
                t.checked_add(k8s_openapi::jiff::SignedDuration::from_millis(400))
                    .unwrap(),
            ),
            leader_transitions: 2,
            ..Default::default()
        };
        assert_eq!(
            String::from_utf8(r.raw()).unwrap(),
            r#"{"holderIdentity":"a","leaseDurationSeconds":15,"acquireTime":"2023-11-14T22:13:20Z","renewTime":"2023-11-14T22:13:20Z","leaderTransitions":2,"strategy":"","preferredHolder":""}"#
        );
        assert_eq!(
            String::from_utf8(LeaderElectionRecord::default().raw()).unwrap(),
            r#"{"holderIdentity":"","leaseDurationSeconds":0,"acquireTime":null,"renewTime":null,"leaderTransitions":0,"strategy":"","preferredHolder":""}"#
        );
    }
}
