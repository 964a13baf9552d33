//! Every finding of each check, for the reports that show a check's
//! verdict: a check's reason names its first finding and counts the rest
//! ("(and 4 more)"); the terminal with `-v`, `summary.md` and `index.html`
//! list them all (issue 42), up to [`MAX_SHOWN`] a check, so a Provider
//! that breaks a rule on every answer cannot make a report unbounded.
//! Messages are kept raw: each reporter escapes them for its medium.

use cetp_vectors::event::Event;
use std::collections::BTreeMap;

/// The most findings a report lists for one check; the rest are counted
/// and left to `events.ndjson`.
pub const MAX_SHOWN: usize = 200;

/// One finding: where it was seen and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The case whose answer was checked.
    pub case_id: String,
    /// The step of that case.
    pub step: usize,
    /// What was found (Provider text inside: escape before showing).
    pub message: String,
}

impl Finding {
    /// `CASE step N: message`, as a check's reason writes its first one.
    pub fn line(&self) -> String {
        format!("{} step {}: {}", self.case_id, self.step, self.message)
    }
}

/// The findings seen so far, by check.
#[derive(Clone, Debug, Default)]
pub struct Findings {
    by_check: BTreeMap<String, (Vec<Finding>, usize)>,
}

impl Findings {
    /// Takes in a `CheckFinding` event; other events are ignored.
    pub fn on_event(&mut self, event: &Event) {
        if let Event::CheckFinding {
            case_id,
            step,
            check,
            message,
            ..
        } = event
        {
            let (kept, total) = self.by_check.entry(check.clone()).or_default();
            *total += 1;
            if kept.len() < MAX_SHOWN {
                kept.push(Finding {
                    case_id: case_id.clone(),
                    step: *step,
                    message: message.clone(),
                });
            }
        }
    }

    /// The findings of `check` kept for showing, and how many there were.
    pub fn of(&self, check: &str) -> (&[Finding], usize) {
        self.by_check
            .get(check)
            .map_or((&[][..], 0), |(kept, total)| (kept.as_slice(), *total))
    }

    /// The line that says how many findings were left out, if any.
    pub fn left_out(&self, check: &str) -> Option<String> {
        let (kept, total) = self.of(check);
        (total > kept.len()).then(|| {
            format!(
                "{} more finding(s) of {check} are in events.ndjson (a report lists {MAX_SHOWN} a check)",
                total - kept.len()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(check: &str, i: usize) -> Event {
        Event::CheckFinding {
            case_id: format!("C-{i}"),
            step: i,
            check: check.into(),
            requirements: vec![],
            level: "MUST".into(),
            message: format!("m{i}"),
        }
    }

    #[test]
    fn every_finding_is_kept_up_to_the_bound_and_the_rest_counted() {
        let mut f = Findings::default();
        for i in 0..3 {
            f.on_event(&finding("CHK-A", i));
        }
        let (kept, total) = f.of("CHK-A");
        assert_eq!((kept.len(), total), (3, 3));
        assert_eq!(kept[2].line(), "C-2 step 2: m2");
        assert!(f.left_out("CHK-A").is_none());
        for i in 0..MAX_SHOWN + 5 {
            f.on_event(&finding("CHK-B", i));
        }
        let (kept, total) = f.of("CHK-B");
        assert_eq!((kept.len(), total), (MAX_SHOWN, MAX_SHOWN + 5));
        assert!(f.left_out("CHK-B").unwrap().starts_with("5 more"));
        assert_eq!(f.of("CHK-NONE").1, 0);
    }
}
