//! Human output of `ictus doctor`: the feature table, the advice, the verdict.

use comfy_table::{ColumnConstraint, ContentArrangement, Table, Width, presets};
use ictus_probe::doctor::{Audit, Status};
#[cfg(feature = "hosts")]
use ictus_probe::doctor::{Check, CheckId};

#[cfg(feature = "hosts")]
use crate::keys::{SOON_DAYS, certificate_ends, end_words};

/// `--keys` without the `hosts` feature: refused.
#[cfg(not(feature = "hosts"))]
pub(crate) fn check_keys(_audit: &mut Audit, dir: &std::path::Path) -> Result<(), String> {
    Err(crate::built::missing(
        "hosts",
        &format!("--keys {}", dir.display()),
    ))
}

/// Adds the `keys` check of the run's keys in `dir` (a folder or a bundle) after the
/// machine's: when each certificate ends; an ended one is a blocker (a run refuses
/// it), one ending within [`SOON_DAYS`] a note. An unreadable folder is an error.
#[cfg(feature = "hosts")]
pub(crate) fn check_keys(audit: &mut Audit, dir: &std::path::Path) -> Result<(), String> {
    let ends = certificate_ends(dir)?;
    let mut detail = Vec::new();
    let (mut ended, mut soon) = (Vec::new(), Vec::new());
    for (who, end) in &ends {
        let (state, due) = end_words(*end);
        detail.push(format!("{who}: {state}"));
        if due && *end <= std::time::SystemTime::now() {
            ended.push(who.clone());
        } else if due {
            soon.push(who.clone());
        }
    }
    let where_ = dir.display();
    let status = if ended.is_empty() {
        Status::Available
    } else {
        Status::Missing
    };
    let advice = (!ended.is_empty() || !soon.is_empty()).then(|| {
        format!(
            "renew a host's certificate with `ictus keys renew KEYS --host H` (a reader's: \
             --reader R), the CA's with `ictus keys new`, then copy the host's bundle \
             (KEYS/bundles/hosts/H) to it; `ictus keys check {where_}` lists them"
        )
    });
    if !ended.is_empty() {
        audit.verdict.blockers.push(format!(
            "the run's keys in {where_}: {} ended; ictus run and ictus node refuse them",
            ended.join(", ")
        ));
    }
    if !soon.is_empty() {
        audit.verdict.notes.push(format!(
            "the run's keys in {where_}: {} end within {SOON_DAYS} days",
            soon.join(", ")
        ));
    }
    audit.checks.push(Check {
        id: CheckId::Keys,
        title: "Run keys (TLS)".into(),
        status,
        detail: detail.join("; "),
        advice,
    });
    Ok(())
}

/// The width the output fits in.
const WIDTH: usize = 100;

/// Renders the audit as a table (feature, status, detail), then one advice paragraph
/// per check that has advice, then the verdict. Fits in 100 columns.
pub(crate) fn render(audit: &Audit) -> String {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .force_no_tty()
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(WIDTH as u16)
        .set_header(vec!["feature", "status", "detail"]);
    // Titles stay on one line; the detail column takes the wrapping.
    let title_width = audit
        .checks
        .iter()
        .map(|c| c.title.chars().count())
        .chain(std::iter::once("feature".len()))
        .max()
        .unwrap_or(0)
        .min(WIDTH / 3);
    for check in &audit.checks {
        table.add_row(vec![
            check.title.clone(),
            status_text(check.status).to_owned(),
            check.detail.clone(),
        ]);
    }
    if let Some(column) = table.column_mut(0) {
        column.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(
            title_width as u16,
        )));
    }
    let mut out = table.to_string();
    out.push('\n');

    let advised: Vec<_> = audit
        .checks
        .iter()
        .filter_map(|c| c.advice.as_deref().map(|a| (c, a)))
        .collect();
    if !advised.is_empty() {
        out.push_str("\nAdvice:\n");
        for (check, advice) in advised {
            let text = format!("{} [{}]: {advice}", check.title, check.id);
            push_wrapped(&mut out, &text, "  - ", "    ");
        }
    }

    let verdict = &audit.verdict;
    out.push_str("\nVerdict:\n");
    push_wrapped(&mut out, &verdict.summary, "  ", "  ");
    if !verdict.blockers.is_empty() {
        out.push_str("Blockers:\n");
        for b in &verdict.blockers {
            push_wrapped(&mut out, b, "  - ", "    ");
        }
    }
    if !verdict.notes.is_empty() {
        out.push_str("Notes:\n");
        for n in &verdict.notes {
            push_wrapped(&mut out, n, "  - ", "    ");
        }
    }
    out
}

fn status_text(status: Status) -> &'static str {
    match status {
        Status::Available => "available",
        Status::Missing => "missing",
        Status::NeedsPrivilege => "needs privilege",
        Status::Unknown => "unknown",
    }
}

/// Appends `text` wrapped at [`WIDTH`] columns, the first line after `first`, the
/// following ones after `rest`. Words longer than a line stay whole.
fn push_wrapped(out: &mut String, text: &str, first: &str, rest: &str) {
    let mut line = String::from(first);
    let mut line_has_word = false;
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if line_has_word && len + 1 + word.chars().count() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = String::from(rest);
            line_has_word = false;
        }
        if line_has_word {
            line.push(' ');
        }
        line.push_str(word);
        line_has_word = true;
    }
    out.push_str(&line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use ictus_probe::doctor::{Check, CheckId, Verdict};

    fn audit() -> Audit {
        Audit {
            checks: vec![
                Check {
                    id: CheckId::Preemption,
                    title: "Kernel preemption".into(),
                    status: Status::Missing,
                    detail: "none, PREEMPT_DYNAMIC (from kernel log \"Dynamic Preempt: none\"): kernel code is not preempted, so wake-up latency follows the longest kernel path".into(),
                    advice: Some("boot with preempt=full (this kernel is PREEMPT_DYNAMIC) or use a PREEMPT_RT kernel".into()),
                },
                Check {
                    id: CheckId::Hz,
                    title: "Tick and timer resolution".into(),
                    status: Status::Available,
                    detail: "HZ=250".into(),
                    advice: None,
                },
            ],
            verdict: Verdict {
                summary: "This machine can run real-time loops with caveats: preemption model none.".into(),
                blockers: vec![],
                notes: vec!["kernel preemption is none".into()],
            },
            idle: Default::default(),
        }
    }

    #[test]
    fn every_line_fits_in_one_hundred_columns() {
        let sut = render(&audit());
        for line in sut.lines() {
            assert!(line.chars().count() <= WIDTH, "too wide: {line}");
        }
    }

    #[test]
    fn the_output_has_titles_advice_and_verdict() {
        let sut = render(&audit());
        assert!(sut.contains("Kernel preemption"));
        assert!(sut.contains("Tick and timer resolution"));
        assert!(sut.contains("missing"));
        assert!(sut.contains("Advice:"));
        assert!(sut.contains("preempt=full"));
        assert!(sut.contains("with caveats"));
        assert!(sut.contains("Notes:"));
        assert!(!sut.contains("Blockers:"));
    }

    #[test]
    fn wrapping_keeps_every_word_in_order() {
        let mut sut = String::new();
        let text = "word ".repeat(60);
        push_wrapped(&mut sut, &text, "  - ", "    ");
        assert!(sut.lines().count() > 1);
        assert_eq!(sut.split_whitespace().filter(|w| *w == "word").count(), 60);
    }
}
