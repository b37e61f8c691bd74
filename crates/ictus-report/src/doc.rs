//! The document model every report is built into once and every backend lays out: a
//! [`Document`] is a title and a list of [`Block`]s, all text. The content side
//! ([`results`](crate::results), [`probes`](crate::probes), the glance, `compare`,
//! `scenario`) builds it; the backends (Markdown, HTML, the terminal's glance) lay it
//! out and know nothing else of the crate: what they write is decided here, how it
//! looks there.
//!
//! Text in a block may hold Markdown's inline marks: backticks (`` `code` ``), which
//! HTML turns into `<code>` in captions, notes, cells and paragraphs, and the
//! scenario's `**bold**`, which only Markdown sets (no scenario is laid out as HTML).

/// A page backend (Markdown, HTML): how it lays out each kind of block, each appended
/// to `out`. Each says how it lays out every kind (the compiler holds it to that); the
/// order and the walk are [`Layout::body`]'s. The terminal lays out the glance only.
pub(crate) trait Layout {
    /// [`Block::Title`].
    fn title(out: &mut String, text: &str);
    /// [`Block::Heading`].
    fn heading(out: &mut String, text: &str);
    /// [`Block::Paragraph`].
    fn paragraph(out: &mut String, text: &str);
    /// [`Block::Byline`].
    fn byline(out: &mut String, text: &str);
    /// [`Block::Lines`].
    fn lines(out: &mut String, lines: &[String]);
    /// [`Block::Alert`].
    fn alert(out: &mut String, text: &str);
    /// [`Block::List`].
    fn list(out: &mut String, items: &[String], blank_after: bool);
    /// [`Block::Table`].
    fn table(out: &mut String, grid: &Grid);
    /// [`Block::Image`].
    fn image(out: &mut String, alt: &str, src: &str);
    /// [`Block::Front`].
    fn front(out: &mut String, front: &Front);
    /// [`Block::Verdict`].
    fn verdict(out: &mut String, verdict: &Verdict);
    /// [`Block::Contents`].
    fn contents(out: &mut String, contents: &Contents);
    /// [`Block::Section`].
    fn section(out: &mut String, section: &Section);
    /// [`Block::Appendix`].
    fn appendix(out: &mut String, appendix: &Appendix);
    /// [`Block::Warnings`].
    fn warnings(out: &mut String, warnings: &[Warning]);

    /// Every block of `doc`, in order.
    fn body(doc: &Document) -> String {
        let mut out = String::new();
        for b in &doc.blocks {
            let o = &mut out;
            match b {
                Block::Title(t) => Self::title(o, t),
                Block::Heading(t) => Self::heading(o, t),
                Block::Paragraph(t) => Self::paragraph(o, t),
                Block::Byline(t) => Self::byline(o, t),
                Block::Lines(l) => Self::lines(o, l),
                Block::Alert(t) => Self::alert(o, t),
                Block::List { items, blank_after } => Self::list(o, items, *blank_after),
                Block::Table(g) => Self::table(o, g),
                Block::Image { alt, src } => Self::image(o, alt, src),
                Block::Front(f) => Self::front(o, f),
                Block::Verdict(v) => Self::verdict(o, v),
                Block::Contents(c) => Self::contents(o, c),
                Block::Section(s) => Self::section(o, s),
                Block::Appendix(a) => Self::appendix(o, a),
                Block::Warnings(w) => Self::warnings(o, w),
            }
        }
        out
    }
}

/// A report, ready to be laid out.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Document {
    /// The page's title (HTML's `<title>`).
    pub(crate) title: String,
    /// What the report says, in order.
    pub(crate) blocks: Vec<Block>,
}

/// One part of a document.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Block {
    /// The document's heading (`# ...`, `<h1>`).
    Title(String),
    /// A section heading (`## ...`, `<h2>`).
    Heading(String),
    /// A paragraph.
    Paragraph(String),
    /// A line under the title that says how to read what follows (HTML sets it as the
    /// host lines are).
    Byline(String),
    /// Lines of one paragraph, each on its own line.
    Lines(Vec<String>),
    /// Something the reader must not miss (set in bold, on a tint in HTML).
    Alert(String),
    /// A bulleted list; `blank_after` ends it with an empty line (Markdown), as
    /// every list does but one that closes a document.
    List {
        /// The items.
        items: Vec<String>,
        /// Whether an empty line follows.
        blank_after: bool,
    },
    /// A table of text.
    Table(Grid),
    /// A picture in a file beside the document, with its alternative text.
    Image {
        /// What it shows, in words.
        alt: String,
        /// The file, relative to the document.
        src: String,
    },
    /// The top of a results report: title, incompleteness, host, source.
    Front(Front),
    /// The verdict: the glance, the line, its evidence, the advice, the audit.
    Verdict(Verdict),
    /// The contents: one entry per numbered section, then the appendices.
    Contents(Contents),
    /// A numbered section: one of the seeds' tables (or a table across runs).
    Section(Section),
    /// A titled table after the sections (why the misses, the survey's steps).
    Appendix(Appendix),
    /// The distinct warnings of the records, each with the steps that met it.
    Warnings(Vec<Warning>),
}

/// A table as the backends write it: the header row, which columns hold numbers
/// (right-aligned), and the rows, all as text.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Grid {
    pub(crate) header: Vec<String>,
    pub(crate) numeric: Vec<bool>,
    pub(crate) rows: Vec<Vec<String>>,
}

impl Grid {
    /// `header` (all text columns) and `rows`.
    pub(crate) fn text(header: &[&str], rows: Vec<Vec<String>>) -> Self {
        Grid {
            header: header.iter().map(|h| h.to_string()).collect(),
            numeric: vec![false; header.len()],
            rows,
        }
    }
}

/// One item of a section's figures: a plot (an SVG, `None` when there was nothing to
/// draw, and its caption), or a note said in place of a plot. Markdown leaves the
/// figures out (they are in the HTML page).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Plot {
    /// A plot and its caption (Markdown backticks allowed).
    Figure {
        /// The drawing, or `None`: then nothing is shown.
        svg: Option<String>,
        /// What it shows.
        caption: String,
    },
    /// A sentence in place of a plot.
    Note(String),
}

impl Plot {
    /// A figure of `svg` captioned `caption`.
    pub(crate) fn figure(svg: Option<String>, caption: impl Into<String>) -> Self {
        Plot::Figure {
            svg,
            caption: caption.into(),
        }
    }
}

/// The top of a results report.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Front {
    /// `ictus survey of vm`.
    pub(crate) title: String,
    /// `INCOMPLETE: ...` when the results are.
    pub(crate) incomplete: Option<String>,
    /// The host and the measurement, one line each.
    pub(crate) host: Vec<String>,
    /// The results' path.
    pub(crate) source: String,
}

/// The verdict of a results report.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Verdict {
    /// Whether the survey's verdict holds (HTML tints it).
    pub(crate) holds: bool,
    /// Each configuration at a glance, where there is one.
    pub(crate) glance: Option<Glance>,
    /// The verdict in one line.
    pub(crate) line: String,
    /// What it rests on.
    pub(crate) evidence: Vec<String>,
    /// The platform audit in one line.
    pub(crate) audit: Option<String>,
}

/// The verdict at a glance: a compact table (Markdown, the terminal), the chart
/// (HTML) and the advice per configuration that missed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Glance {
    /// One row per configuration.
    pub(crate) table: Grid,
    /// The same as a chart.
    pub(crate) svg: String,
    /// What the chart shows.
    pub(crate) caption: String,
    /// `(place, advice)` per configuration that missed.
    pub(crate) advice: Vec<(String, String)>,
}

/// A report's contents.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Contents {
    /// One entry per numbered section, in order.
    pub(crate) entries: Vec<Entry>,
    /// The parts after the sections: `(anchor, title)`.
    pub(crate) more: Vec<(&'static str, &'static str)>,
    /// Where the figures are, for a backend that leaves them out.
    pub(crate) figures_elsewhere: &'static str,
}

/// One entry of the contents.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) number: usize,
    pub(crate) id: &'static str,
    pub(crate) title: String,
    pub(crate) seed: &'static str,
}

/// A numbered section.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Section {
    /// Its heading: number, anchor, title and source.
    pub(crate) entry: Entry,
    /// What it holds.
    pub(crate) body: Body,
}

/// What a section holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Body {
    /// Why its table is empty (a sentence, capitalised when laid out).
    Absent(String),
    /// Said in place of a table across runs that none of them has.
    Unmeasured(String),
    /// A table, with what surrounds it.
    Table {
        /// What the table shows, above it.
        caption: Option<String>,
        /// The table.
        grid: Grid,
        /// Its footnotes.
        notes: Vec<String>,
        /// Whether the notes are a loose list (an empty line between them, Markdown).
        loose_notes: bool,
        /// Its figures, `None` for none at all (HTML draws an empty box for `Some`
        /// of none).
        figures: Option<Vec<Plot>>,
    },
}

/// A titled table after the sections.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Appendix {
    /// Its anchor (`why`).
    pub(crate) id: &'static str,
    /// Its heading.
    pub(crate) title: &'static str,
    /// How to read it.
    pub(crate) note: Option<&'static str>,
    /// The table.
    pub(crate) grid: Grid,
}

/// A warning and the steps that met it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Warning {
    /// Its id (`smt_sibling_busy`).
    pub(crate) id: String,
    /// What it says.
    pub(crate) message: String,
    /// What to do about it.
    pub(crate) advice: Option<String>,
    /// The steps that met it.
    pub(crate) steps: Vec<String>,
}
