//! A bound on all the work one schema can cause.
//!
//! What the generator does not build constructively it draws and filters,
//! and a filter whose keyword no drawn value satisfies (a contradiction the
//! construction did not see) would otherwise loop as long as the proptest
//! runner lets it: for ever with `max_local_rejects: u32::MAX`. The schemas
//! come from the Provider under test, so that is a way to stall the harness.
//!
//! Every filter's source is a [`Guard`]: each attempt costs one tick of the
//! budget in force on this thread, and when the attempts or the time run out
//! the draw fails at once, naming the keyword and schema location of the
//! filter that ran out. A budget is put in force by [`within`]: around each
//! draw of a strategy the crate hands out ([`Budgeted`]), and around each
//! probe made while strategies are built. Construction as a whole has its
//! own deadline (see `Gen::check_build`).

use proptest::strategy::{NewTree, Strategy};
use proptest::test_runner::TestRunner;
use std::cell::RefCell;
use std::fmt;
use std::time::{Duration, Instant};

/// Limits of one draw (or probe): filter attempts and wall-clock time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Candidates a filter may throw away before the draw gives up.
    pub attempts: u64,
    /// Wall-clock time the draw may take.
    pub time: Duration,
}

/// How much work one schema may cost: its construction ([`crate::Generator::new`]
/// plus `valid`/`invalid`), and each value drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Wall-clock time building the generator may take.
    pub build: Duration,
    /// Each value drawn.
    pub draw: Limits,
    /// Each probe made while building: whether a strategy yields at all
    /// (a strategy that does not is left out, or refused by name).
    pub probe: Limits,
}

impl Budget {
    /// The same attempts with `factor` times the time: outcomes then
    /// depend on the attempt counts and the seed only, not on how loaded
    /// the machine is (the suite run uses it; its process limit still
    /// catches a hang).
    pub fn slower(self, factor: u32) -> Budget {
        Budget {
            build: self.build * factor,
            draw: Limits {
                time: self.draw.time * factor,
                ..self.draw
            },
            probe: Limits {
                time: self.probe.time * factor,
                ..self.probe
            },
        }
    }
}

impl Default for Budget {
    /// A tool's arguments are small: a value that takes more than 20 000
    /// filter attempts or 200 ms is not coming, and a schema whose
    /// strategies take more than 2 s to build is refused.
    fn default() -> Budget {
        Budget {
            build: Duration::from_secs(2),
            draw: Limits {
                attempts: 20_000,
                time: Duration::from_millis(200),
            },
            probe: Limits {
                attempts: 2_000,
                time: Duration::from_millis(100),
            },
        }
    }
}

/// The filter a budget ran out in: its keyword and schema location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Label {
    pub keyword: String,
    pub pointer: String,
}

impl Label {
    pub fn new(keyword: &str, pointer: &str) -> Label {
        Label {
            keyword: keyword.to_string(),
            pointer: pointer.to_string(),
        }
    }
}

struct State {
    deadline: Instant,
    attempts_left: u64,
    exhausted: Option<Label>,
    /// Rejections per filter: the one that rejected most is the one named
    /// when the budget runs out (a filter's attempts also tick the filters
    /// nested in its source).
    rejects: Vec<(Label, u64)>,
}

thread_local! {
    static CURRENT: RefCell<Option<State>> = const { RefCell::new(None) };
    /// Where the last budget ran out, for the error the caller builds.
    static LAST: RefCell<Option<Label>> = const { RefCell::new(None) };
}

/// Runs `f` under a fresh budget of `limits` (the one in force before is
/// restored after); returns where it ran out, if it did.
pub(crate) fn within<T>(limits: Limits, f: impl FnOnce() -> T) -> (T, Option<Label>) {
    let fresh = State {
        deadline: Instant::now() + limits.time,
        attempts_left: limits.attempts,
        exhausted: None,
        rejects: Vec::new(),
    };
    let saved = CURRENT.with(|c| c.borrow_mut().replace(fresh));
    let out = f();
    let mine = CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), saved));
    let label = mine.and_then(|s| s.exhausted);
    if label.is_some() {
        LAST.with(|l| *l.borrow_mut() = label.clone());
    }
    (out, label)
}

pub(crate) fn clear_last() {
    LAST.with(|l| *l.borrow_mut() = None);
}

/// Where the last budget on this thread ran out.
pub(crate) fn last_exhausted() -> Option<Label> {
    LAST.with(|l| l.borrow().clone())
}

/// One attempt of the filter `label`. Outside any budget (a strategy of
/// this crate's drawn only through [`Budgeted`], so only in this crate's
/// own unit code) nothing is counted.
fn tick(label: &Label) -> Result<(), String> {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        let Some(s) = c.as_mut() else {
            return Ok(());
        };
        if let Some(l) = &s.exhausted {
            return Err(exhausted_reason(l));
        }
        if s.attempts_left == 0 || Instant::now() >= s.deadline {
            let worst = s
                .rejects
                .iter()
                .max_by_key(|(_, n)| *n)
                .map_or_else(|| label.clone(), |(l, _)| l.clone());
            let reason = exhausted_reason(&worst);
            s.exhausted = Some(worst);
            return Err(reason);
        }
        s.attempts_left -= 1;
        Ok(())
    })
}

fn exhausted_reason(l: &Label) -> String {
    format!(
        "draw budget exhausted: `{}` at {:?} rejected every value drawn",
        l.keyword, l.pointer
    )
}

fn rejected(label: &Label) {
    CURRENT.with(|c| {
        if let Some(s) = c.borrow_mut().as_mut() {
            match s.rejects.iter_mut().find(|(l, _)| l == label) {
                Some((_, n)) => *n += 1,
                None => s.rejects.push((label.clone(), 1)),
            }
        }
    })
}

/// A filter's source: every value drawn for the filter costs a tick.
pub(crate) struct Guard<S> {
    pub inner: S,
    pub label: Label,
}

impl<S> fmt::Debug for Guard<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guard({:?})", self.label)
    }
}

impl<S: Strategy> Strategy for Guard<S> {
    type Tree = S::Tree;
    type Value = S::Value;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        tick(&self.label)?;
        self.inner.new_tree(runner)
    }
}

/// `s` filtered by `keep`, every attempt charged to the budget in force.
pub(crate) fn filter<T: fmt::Debug + 'static>(
    s: proptest::strategy::BoxedStrategy<T>,
    label: Label,
    whence: &'static str,
    keep: impl Fn(&T) -> bool + 'static,
) -> proptest::strategy::BoxedStrategy<T> {
    let mine = label.clone();
    Guard { inner: s, label }
        .prop_filter(whence, move |v| {
            let ok = keep(v);
            if !ok {
                rejected(&mine);
            }
            ok
        })
        .boxed()
}

/// A strategy handed out by the crate: each draw runs under a fresh budget.
pub(crate) struct Budgeted<S> {
    pub inner: S,
    pub limits: Limits,
}

impl<S> fmt::Debug for Budgeted<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Budgeted({:?})", self.limits)
    }
}

impl<S: Strategy> Strategy for Budgeted<S> {
    type Tree = S::Tree;
    type Value = S::Value;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        within(self.limits, || self.inner.new_tree(runner)).0
    }
}
