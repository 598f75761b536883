//! The size budgets of pods: a workload's template is slimmed until a
//! sample pod, rendered, fits them.

use super::Generator;
use super::render::{PodDraw, render_pod};
use super::template::{MAX_SLIM, PodTemplate, build_template};

/// Largest pod (bytes of JSON) a template may give, with room for per-pod
/// variation (longer names and ordinals): pods stay within 4–8 KiB.
const POD_BUDGET: usize = 7_900;
/// Largest managedFields (bytes of JSON) of a template's running pods:
/// they stay within 1.5–3 KiB. Their size does not vary between the pods of
/// one template (the sample pod has the longest IPs) but for a succeeded Job
/// pod's condition reasons (42 bytes more).
const MANAGED_BUDGET: usize = 2_980;
/// Per container, room for a restart's `lastState` in the status.
const RESTART_ROOM: usize = 260;

/// The template of workload `wi`, slimmed (fewer sidecars, variables,
/// labels...) until a sample pod fits [`POD_BUDGET`] and [`MANAGED_BUDGET`].
pub(super) fn template_within_budget(g: &Generator, wi: usize) -> PodTemplate {
    let w = &g.workloads[wi];
    let mut slim = 0;
    loop {
        let t = build_template(g, wi, slim);
        let draw = PodDraw::sample(&t, wi, &w.owner, g.base_time);
        let namespace = &g.namespaces[w.namespace].name;
        let sample = render_pod(&t, w.kind, namespace, false, &mut |slot| draw.value(slot));
        let pod =
            serde_json::to_vec(&sample).expect("JSON").len() + RESTART_ROOM * t.containers.len();
        let managed = serde_json::to_vec(&sample["metadata"]["managedFields"])
            .expect("JSON")
            .len();
        if (pod <= POD_BUDGET && managed <= MANAGED_BUDGET) || slim == MAX_SLIM {
            return t;
        }
        slim += 1;
    }
}
