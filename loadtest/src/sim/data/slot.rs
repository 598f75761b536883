//! The per-pod values of a pod template ([`Slot`]s), and the sentinels
//! that stand for them in a template rendered for splicing.

/// A per-pod value in a pod template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    Name,
    /// The StatefulSet ordinal, as a label value.
    PodIndex,
    /// The StatefulSet pod's volume claim, `data-{name}`.
    ClaimName,
    NodeName,
    AccessVolume,
    /// When the pod was created (kube-controller-manager's write).
    Created,
    HostIp,
    PodIp,
    Scheduled,
    Initialized,
    Ready,
    ContainerId(usize),
    RestartCount(usize),
    State(usize),
    LastState(usize),
}

/// Slots before the per-container ones.
const POD_SLOTS: usize = 11;

impl Slot {
    fn id(self) -> usize {
        match self {
            Slot::Name => 0,
            Slot::PodIndex => 1,
            Slot::ClaimName => 2,
            Slot::NodeName => 3,
            Slot::AccessVolume => 4,
            Slot::Created => 5,
            Slot::HostIp => 6,
            Slot::PodIp => 7,
            Slot::Scheduled => 8,
            Slot::Initialized => 9,
            Slot::Ready => 10,
            Slot::ContainerId(i) => POD_SLOTS + 4 * i,
            Slot::RestartCount(i) => POD_SLOTS + 4 * i + 1,
            Slot::State(i) => POD_SLOTS + 4 * i + 2,
            Slot::LastState(i) => POD_SLOTS + 4 * i + 3,
        }
    }

    pub(super) fn from_id(id: usize) -> Slot {
        const FIXED: [Slot; POD_SLOTS] = [
            Slot::Name,
            Slot::PodIndex,
            Slot::ClaimName,
            Slot::NodeName,
            Slot::AccessVolume,
            Slot::Created,
            Slot::HostIp,
            Slot::PodIp,
            Slot::Scheduled,
            Slot::Initialized,
            Slot::Ready,
        ];
        if id < POD_SLOTS {
            return FIXED[id];
        }
        let (i, k) = ((id - POD_SLOTS) / 4, (id - POD_SLOTS) % 4);
        [
            Slot::ContainerId(i),
            Slot::RestartCount(i),
            Slot::State(i),
            Slot::LastState(i),
        ][k]
    }

    /// A string that stands for the slot in a rendered template: private-use
    /// characters, which serde_json writes unescaped and real objects never
    /// hold.
    pub(super) fn sentinel(self) -> String {
        format!("{SENTINEL_OPEN}{}{SENTINEL_CLOSE}", self.id())
    }
}

pub(super) const SENTINEL_OPEN: char = '\u{e000}';
pub(super) const SENTINEL_CLOSE: char = '\u{e001}';
