//! The plain types of the timeline chart (a leaf): [`Lanes`] of named
//! [`Section`]s, each a list of [`Row`]s of [`Segment`]s and [`Mark`]s,
//! coloured by [`Tone`]. `lanes.rs` builds them and re-exports them; the
//! lane builders in their own files import them from here.

use crate::timeline::Ms;

/// What a segment or mark means, which decides its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Held, Ready, served: good.
    Ok,
    /// A fault in place, a node NotReady, a pod Terminating, an eviction
    /// refused (429): the disruption being measured.
    Fault,
    /// Failed, Unknown, stuck, error window: what went wrong.
    Bad,
    /// Setup, cleanup, actions, a deleted Node.
    Neutral,
    /// Taken out of service on purpose: cordoned, evicted.
    Cordon,
}

/// A stretch of time `from..to` (ms since the start of the run; equal for
/// a moment) in one state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub from: Ms,
    pub to: Ms,
    pub tone: Tone,
    /// What it was, for the tooltip (`worker-1 Unknown for 4m50s`).
    pub title: String,
}

/// A moment on a row: where an expectation was seen (no tone: drawn
/// hollow), or an event such as one eviction (drawn in its tone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub at: Ms,
    pub tone: Option<Tone>,
    pub title: String,
}

/// One row: a label, the segments drawn on it in time order, and marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub label: String,
    pub segments: Vec<Segment>,
    pub marks: Vec<Mark>,
}

impl Row {
    /// A row of one segment titled with its label.
    pub(super) fn one(label: String, tone: Tone, from: Ms, to: Ms) -> Row {
        Row {
            segments: vec![Segment {
                from,
                to: to.max(from),
                tone,
                title: label.clone(),
            }],
            label,
            marks: Vec::new(),
        }
    }

    /// The tone of its first segment (a row's main meaning).
    pub fn tone(&self) -> Option<Tone> {
        self.segments.first().map(|s| s.tone)
    }

    /// Every moment it draws: segment ends and marks.
    pub fn times(&self) -> impl Iterator<Item = Ms> + '_ {
        self.segments
            .iter()
            .flat_map(|s| [s.from, s.to])
            .chain(self.marks.iter().map(|m| m.at))
    }
}

/// A named group of rows (`Steps`, `Nodes`, `Pods`, `Volumes`, `Clients`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub rows: Vec<Row>,
}

/// The whole chart: ms since start from 0 to `end`, with T0 when reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lanes {
    pub title: String,
    pub t0: Option<Ms>,
    pub end: Ms,
    pub sections: Vec<Section>,
}

impl Lanes {
    /// Every moment drawn, for the time axis to keep readable.
    pub fn times(&self) -> Vec<Ms> {
        let mut out: Vec<Ms> = self
            .sections
            .iter()
            .flat_map(|s| &s.rows)
            .flat_map(Row::times)
            .chain(self.t0)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}
