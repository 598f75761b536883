//! The policy of the edge-case corpus (`testdata/apiserver-golden/edges`, its
//! README's "Identities and RBAC"): the users, service accounts, tokens
//! and RBAC of the real kube-apiserver v1.28 it was recorded from, so the
//! sim can answer its requests as that server did.
//!
//! | identity | token | may |
//! |---|---|---|
//! | `admin` | `admin-token` | everything (`system:masters`) |
//! | `alice` | `alice-token` | get, list, watch, create, update, patch, delete pods and configmaps in `payments-prod` |
//! | `bob` | `bob-token` | get, list, watch pods everywhere |
//! | `eve` | `eve-token` | nothing beyond what every authenticated user may |
//! | SA `team-a/ns-reader` | none (impersonated only) | list, watch pods in `team-a` |
//! | SA `default/impersonator` | a JWT | impersonate users `eve` and `alice`, group `team-x`, any service account |
//! | SA `default/impersonator-none` | a JWT | nothing |
//! | SA `payments-prod/golden-edges-rn` | a JWT | get, list, watch pod [`POD_X`] only |
//! | SA `payments-prod/golden-edges-listonly` | a JWT | list configmaps in `payments-prod` |
//!
//! The static-token users have uid `uid-<name>`; a service account the uid
//! of its JWT's claims. The JWTs are the corpus's throwaway TokenRequest
//! tokens (`tokens.json`), taken as opaque tokens: the sim checks no
//! signature.

use super::policy::{Policy, RoleRef, Rule, Subject, User};

/// The namespace of most cases, alice's.
pub const PAYMENTS: &str = "payments-prod";
/// The pod the resourceNames rule names (the README's X), in [`PAYMENTS`].
pub const POD_X: &str = "payments-admin-df4vlxxh7l-2hlk4";

/// The service accounts with a token: namespace, name, uid, token.
pub const SERVICE_ACCOUNTS: &[(&str, &str, &str, &str)] = &[
    (
        "default",
        "impersonator",
        "f8daa652-7d64-4830-bcef-328f05043fcf",
        "eyJhbGciOiJSUzI1NiIsImtpZCI6Ikd3eWZ0Z2hEUFNJUkdMZjh6cXhyc1p4X2pLckxyaWc4Mm9FS3JOcFppa2MifQ.eyJhdWQiOlsiaHR0cHM6Ly9rdWJlcm5ldGVzLmRlZmF1bHQuc3ZjIl0sImV4cCI6MjExMTExMDE5OSwiaWF0IjoxNzk1NzUwMTk5LCJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMiLCJrdWJlcm5ldGVzLmlvIjp7Im5hbWVzcGFjZSI6ImRlZmF1bHQiLCJzZXJ2aWNlYWNjb3VudCI6eyJuYW1lIjoiaW1wZXJzb25hdG9yIiwidWlkIjoiZjhkYWE2NTItN2Q2NC00ODMwLWJjZWYtMzI4ZjA1MDQzZmNmIn19LCJuYmYiOjE3OTU3NTAxOTksInN1YiI6InN5c3RlbTpzZXJ2aWNlYWNjb3VudDpkZWZhdWx0OmltcGVyc29uYXRvciJ9.QzTgTAfEOkaW_L81A7RN6SB0zmAds77nuKBD1z72Y3LUhv0ooZdUEoCS6G4K2vdlYMPht46K9vixnNo6JOxA9Cg3TMPHFUkAyh1IWlpc1itgTLYeQr33FYop1tFDgUlY1JR7jAUSuHllXy8DjXue4why77-oxLCSu625720kGMs93n_ISnia0RwZwMmEgYqbl10Iv32_xlt1OLsm2HUJzna-Ix07CukhFhL37mUk502fUsuli6Ir2CIILcBJ32iV25rsxhc6QWPUeVFIf1Z5caWt8IZlgOqyKVovmstdn15nbzWDnjY9yF_BbhnImOx6BzcwGggTUkdtdkdI-_Y7VA",
    ),
    (
        "default",
        "impersonator-none",
        "f89ae193-803f-4f5a-9747-c3adf2c8ea87",
        "eyJhbGciOiJSUzI1NiIsImtpZCI6Ikd3eWZ0Z2hEUFNJUkdMZjh6cXhyc1p4X2pLckxyaWc4Mm9FS3JOcFppa2MifQ.eyJhdWQiOlsiaHR0cHM6Ly9rdWJlcm5ldGVzLmRlZmF1bHQuc3ZjIl0sImV4cCI6MjExMTExMDIwMCwiaWF0IjoxNzk1NzUwMjAwLCJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMiLCJrdWJlcm5ldGVzLmlvIjp7Im5hbWVzcGFjZSI6ImRlZmF1bHQiLCJzZXJ2aWNlYWNjb3VudCI6eyJuYW1lIjoiaW1wZXJzb25hdG9yLW5vbmUiLCJ1aWQiOiJmODlhZTE5My04MDNmLTRmNWEtOTc0Ny1jM2FkZjJjOGVhODcifX0sIm5iZiI6MTc5NTc1MDIwMCwic3ViIjoic3lzdGVtOnNlcnZpY2VhY2NvdW50OmRlZmF1bHQ6aW1wZXJzb25hdG9yLW5vbmUifQ.MmKOUzqxpoWIZwZjI3yOY_jAIs99KkEb0g75MPL3b_QOnX65mqPpDf4SJjmiRBy9cZQWlLRNc0iQz8CqrzFF1Nx1ZJvyiivsJ3NUNoLRleEurqsafUewhnDfJuKN-JFAJ0EHDJNmS9cte0sPk_NKX9Wg3rmwbec4w6ZPWhsKzNFFN6gCMziOw3im9K2GC72VLLSKVe3GmYocwwy89r1Dqf6PLDLuJRCmSgK55_ytQZX4LuShZxXhG5rOJ9u91pOXqIytKz6vbh6TTfHZX4r9Z4KbqL4NElbmgEo9oNQ5E_FSmZN9VgjgauEl4SM5FYLMSmsLlYmbJNCCjCy4uVEG-w",
    ),
    (
        "payments-prod",
        "golden-edges-rn",
        "dd138a40-b8e8-4911-8189-82168b82f2eb",
        "eyJhbGciOiJSUzI1NiIsImtpZCI6Ikd3eWZ0Z2hEUFNJUkdMZjh6cXhyc1p4X2pLckxyaWc4Mm9FS3JOcFppa2MifQ.eyJhdWQiOlsiaHR0cHM6Ly9rdWJlcm5ldGVzLmRlZmF1bHQuc3ZjIl0sImV4cCI6MjExMTExMDIwMCwiaWF0IjoxNzk1NzUwMjAwLCJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMiLCJrdWJlcm5ldGVzLmlvIjp7Im5hbWVzcGFjZSI6InBheW1lbnRzLXByb2QiLCJzZXJ2aWNlYWNjb3VudCI6eyJuYW1lIjoiZ29sZGVuLWVkZ2VzLXJuIiwidWlkIjoiZGQxMzhhNDAtYjhlOC00OTExLTgxODktODIxNjhiODJmMmViIn19LCJuYmYiOjE3OTU3NTAyMDAsInN1YiI6InN5c3RlbTpzZXJ2aWNlYWNjb3VudDpwYXltZW50cy1wcm9kOmdvbGRlbi1lZGdlcy1ybiJ9.gbNxa_5u5rJxh9cXHAqtZTDKcup181XhrgDo6NT_4X-MCQuAC9Sxcx4kxZv-gW6Ga9MCUZOZ4vUiv_qXP8zmrJVrc4l44tYPC11lpOfa11mggbzvpJUmDd03b71wcO8OAw153XX-W4bzEVFtOCDY6M7VaQB8WTFrVDcCuNgub8qg4xakZtZhhhip_bEuCucKb-1eHsP-Scs7l0x4-dnZFpaF12hC1aMod9VUrDKVcpOX0kksrtad4KKM2If_RQ3PCyLYQIJSaXxFhvvSim3vM3F7ypuuB3JN1e5XW1-oUpnh4FjkyjNObHlp9286M4qo02V6Htw6BsH2N2kpHyQUvQ",
    ),
    (
        "payments-prod",
        "golden-edges-listonly",
        "01ee822a-1ec0-4012-acb0-4aad2d8ed98b",
        "eyJhbGciOiJSUzI1NiIsImtpZCI6Ikd3eWZ0Z2hEUFNJUkdMZjh6cXhyc1p4X2pLckxyaWc4Mm9FS3JOcFppa2MifQ.eyJhdWQiOlsiaHR0cHM6Ly9rdWJlcm5ldGVzLmRlZmF1bHQuc3ZjIl0sImV4cCI6MjExMTExMDIwMCwiaWF0IjoxNzk1NzUwMjAwLCJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMiLCJrdWJlcm5ldGVzLmlvIjp7Im5hbWVzcGFjZSI6InBheW1lbnRzLXByb2QiLCJzZXJ2aWNlYWNjb3VudCI6eyJuYW1lIjoiZ29sZGVuLWVkZ2VzLWxpc3Rvbmx5IiwidWlkIjoiMDFlZTgyMmEtMWVjMC00MDEyLWFjYjAtNGFhZDJkOGVkOThiIn19LCJuYmYiOjE3OTU3NTAyMDAsInN1YiI6InN5c3RlbTpzZXJ2aWNlYWNjb3VudDpwYXltZW50cy1wcm9kOmdvbGRlbi1lZGdlcy1saXN0b25seSJ9.BfxOzq5H7C6QTsd0zwcUluiq7-ZkJ4D5QDWhgXOj7iXFH67fuElktCxvgpYFpCXS0f86Yf9bFNH31GTM--xFNo6m-hSdKZBCfV9ZlG9QvJPwhRDC-MKY3GPotB8uKrecz8BximcHXzVTuBY24mZTwRglVFiqEk5ul24iatjSFOIWN3VXsNSLuiHbrBEzNWImaEW8qajG6vJvXADlKrqmbeMpwx1dQ2ZWPZLLxuXCOu0snJ8qReUdi159aEH-2OyB_z_UkoT45BPR1TUShwQoS3_XkJJYMXy9RPIQRlIdgQdA1nKoQ1S-JQQQgJ8F73Cx9YYi4wG6cyFc5fJGiWQ06A",
    ),
];

const READ: &[&str] = &["get", "list", "watch"];

impl Policy {
    /// The corpus's identities and RBAC (see the module documentation).
    pub fn edges() -> Policy {
        let mut policy = Policy::new()
            .user(User::new("admin", "admin-token").in_groups(&["system:masters"]))
            .user(User::new("alice", "alice-token"))
            .user(User::new("bob", "bob-token"))
            .user(User::new("eve", "eve-token"));
        for (namespace, name, uid, token) in SERVICE_ACCOUNTS {
            policy = policy.user(User::service_account(namespace, name, uid, token));
        }
        let service_account = |namespace: &str, name: &str| {
            vec![Subject::ServiceAccount {
                namespace: namespace.into(),
                name: name.into(),
            }]
        };
        policy
            .cluster_admin()
            .role(
                PAYMENTS,
                "alice-pods-configmaps",
                vec![Rule::resources(
                    &[
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ],
                    &[""],
                    &["pods", "configmaps"],
                )],
            )
            .binding(
                PAYMENTS,
                "alice-pods-configmaps",
                RoleRef::Role("alice-pods-configmaps".into()),
                vec![Subject::User("alice".into())],
            )
            .cluster_role(
                "bob-pod-reader",
                vec![Rule::resources(READ, &[""], &["pods"])],
            )
            .cluster_binding(
                "bob-pod-reader",
                "bob-pod-reader",
                vec![Subject::User("bob".into())],
            )
            .role(
                "team-a",
                "pod-list-watch",
                vec![Rule::resources(&["list", "watch"], &[""], &["pods"])],
            )
            .binding(
                "team-a",
                "ns-reader-pods",
                RoleRef::Role("pod-list-watch".into()),
                service_account("team-a", "ns-reader"),
            )
            .cluster_role(
                "golden-edges-impersonator",
                vec![
                    Rule::resources(&["impersonate"], &[""], &["users"]).named(&["eve", "alice"]),
                    Rule::resources(&["impersonate"], &[""], &["groups"]).named(&["team-x"]),
                    Rule::resources(&["impersonate"], &[""], &["serviceaccounts"]),
                ],
            )
            .cluster_binding(
                "golden-edges-impersonator",
                "golden-edges-impersonator",
                service_account("default", "impersonator"),
            )
            .role(
                PAYMENTS,
                "golden-edges-rn",
                vec![Rule::resources(READ, &[""], &["pods"]).named(&[POD_X])],
            )
            .binding(
                PAYMENTS,
                "golden-edges-rn",
                RoleRef::Role("golden-edges-rn".into()),
                service_account(PAYMENTS, "golden-edges-rn"),
            )
            .role(
                PAYMENTS,
                "golden-edges-listonly",
                vec![Rule::resources(&["list"], &[""], &["configmaps"])],
            )
            .binding(
                PAYMENTS,
                "golden-edges-listonly",
                RoleRef::Role("golden-edges-listonly".into()),
                service_account(PAYMENTS, "golden-edges-listonly"),
            )
    }
}
