//! The book's figures: one small chart type for every plot a chapter shows, drawn as SVG, and
//! the check that keeps each committed figure equal to what its run draws.
//!
//! No upstream file: this is the executable book's own support, drawn with `plotters`' SVG
//! backend (no font stack: text is left to the browser).
//!
//! # Model
//!
//! A [`Figure`] is a named list of layers over two axes:
//!
//! ```text
//!   band    a shaded range [lo, hi] at each x: what a band lets through
//!   points  this run's values, one series per run (a second series draws beside the first)
//!   law     a formula's line, dashed: what the points are held against
//!   level   a horizontal rule (a ceiling), mark: a vertical rule (the run where it bends)
//! ```
//!
//! An axis is linear, logarithmic, or ordinal (evenly spaced categories). A figure a chapter
//! shows lives in `chapters/figures/NAME.svg`, and [`Figure::publish`] holds it there: the
//! chapter's block draws the figure from its run and fails if the committed file differs
//! (`cargo test`), and the `controlloop` command ([`redraw_figures`]) rewrites it instead. A
//! figure of a run-specific (real-clock) run changes every run, so it is never committed:
//! [`Figure::record_measured`] writes it beside the run's measured values
//! ([`super::measured`]).
//!
//! # Invariants
//!
//! 1. Drawing is deterministic: the same figure gives the same SVG, byte for byte, so a
//!    committed figure is stale only when its run or its drawing changed.
//! 2. Outside [`redraw_figures`] mode, [`Figure::publish`] never writes: a stale figure is an
//!    error naming the file, as a changed snapshot is under `CI=true`.
//!
//! # Concurrency
//!
//! The redraw mode and the list of redrawn files are process-wide (an atomic flag and a
//! mutex), set once by the command before it runs any experiment. Tests and doctests never set
//! the flag, so they only read.
//!
//! # Differences from upstream
//!
//! None: there is no upstream.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use plotters::coord::{
    Shift,
    ranged1d::{AsRangedCoord, ValueFormatter},
};
use plotters::prelude::*;

pub use plotters::chart::SeriesLabelPosition;

/// Where the committed figures live (the chapters link them as `figures/NAME.svg`).
pub const FIGURES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../chapters/figures");

/// How an axis places its values.
#[derive(Debug, Clone, PartialEq)]
pub enum Scale {
    /// Evenly spaced by value.
    Linear,
    /// Evenly spaced by order of magnitude; every value must be above 0.
    Log,
    /// Categories at x = 0, 1, 2, …, evenly spaced whatever they stand for, with these labels.
    Ordinal(Vec<String>),
}

/// One axis: its label, its scale and how its ticks are printed.
#[derive(Debug, Clone)]
pub struct Axis {
    label: String,
    scale: Scale,
    format: fn(f64) -> String,
}

#[derive(Debug, Clone)]
enum Layer {
    Band(String, Vec<(f64, f64, f64)>),
    Points(String, Vec<(f64, f64)>),
    Law(String, Vec<(f64, f64)>),
    Level(String, f64),
    Mark(String, f64),
}

/// A chart: a name (its file), a title, two axes and the layers drawn on them, in order.
#[derive(Debug, Clone)]
pub struct Figure {
    name: String,
    title: String,
    x: Axis,
    y: Axis,
    layers: Vec<Layer>,
    legend: SeriesLabelPosition,
}

/// The series colours, in order: a second run of the same figure draws in the second one.
const SERIES: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
];
const LAW: RGBColor = RGBColor(214, 39, 40);
const LEVEL: RGBColor = RGBColor(90, 90, 90);
const MARK: RGBColor = RGBColor(148, 103, 189);

/// Prints a tick value without a float's noise: `200`, `0.5`, `1592`.
pub fn plain(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round())
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// Prints seconds the way a person reads a delay: `5 ms`, `2 s`, `16 min 40 s`.
pub fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{} ms", plain(s * 1000.0))
    } else if s < 60.0 {
        format!("{} s", plain(s))
    } else {
        let (m, rest) = ((s / 60.0).floor(), s % 60.0);
        if rest < 1e-9 {
            format!("{m} min")
        } else {
            format!("{m} min {} s", plain(rest))
        }
    }
}

impl Figure {
    /// An empty figure: `name` is its file's stem, `title` its caption. Both axes start linear.
    pub fn new(name: impl Into<String>, title: impl Into<String>) -> Self {
        let axis = |label: &str| Axis {
            label: label.to_owned(),
            scale: Scale::Linear,
            format: plain,
        };
        Figure {
            name: name.into(),
            title: title.into(),
            x: axis("x"),
            y: axis("y"),
            layers: Vec::new(),
            legend: SeriesLabelPosition::UpperLeft,
        }
    }

    /// The file's stem.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the x axis.
    pub fn x(mut self, label: impl Into<String>, scale: Scale, format: fn(f64) -> String) -> Self {
        self.x = Axis {
            label: label.into(),
            scale,
            format,
        };
        self
    }

    /// Sets the y axis (an ordinal y axis is not supported).
    pub fn y(mut self, label: impl Into<String>, scale: Scale, format: fn(f64) -> String) -> Self {
        assert!(
            !matches!(scale, Scale::Ordinal(_)),
            "an ordinal y axis is not supported"
        );
        self.y = Axis {
            label: label.into(),
            scale,
            format,
        };
        self
    }

    /// Where the legend goes (upper left unless set): a corner the points leave free.
    pub fn legend(mut self, corner: SeriesLabelPosition) -> Self {
        self.legend = corner;
        self
    }

    /// A shaded range `[lo, hi]` at each `x` (given as `(x, lo, hi)`, in x order): the band a
    /// banded figure must fall in.
    pub fn band(mut self, label: impl Into<String>, ranges: Vec<(f64, f64, f64)>) -> Self {
        self.layers.push(Layer::Band(label.into(), ranges));
        self
    }

    /// One run's points, joined by a line; each call adds a series in the next colour.
    pub fn points(mut self, label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        self.layers.push(Layer::Points(label.into(), points));
        self
    }

    /// A formula, drawn as a dashed line through `points`.
    pub fn law(mut self, label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        self.layers.push(Layer::Law(label.into(), points));
        self
    }

    /// A horizontal rule at `y`, such as a ceiling.
    pub fn level(mut self, label: impl Into<String>, y: f64) -> Self {
        self.layers.push(Layer::Level(label.into(), y));
        self
    }

    /// A vertical rule at `x`, such as the run where a curve bends.
    pub fn mark(mut self, label: impl Into<String>, x: f64) -> Self {
        self.layers.push(Layer::Mark(label.into(), x));
        self
    }

    /// The figure as an SVG document (keeps I1: nothing in it depends on the time or the
    /// machine).
    ///
    /// # Panics
    /// If the figure has no points, or a log axis holds a value at or below 0.
    pub fn svg(&self) -> String {
        let (x, y) = (self.range(true), self.range(false));
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (720, 420)).into_drawing_area();
            root.fill(&WHITE).expect("fill an SVG string");
            match (&self.x.scale, &self.y.scale) {
                (Scale::Log, Scale::Log) => {
                    self.draw(&root, (x.0..x.1).log_scale(), (y.0..y.1).log_scale())
                }
                (Scale::Log, _) => self.draw(&root, (x.0..x.1).log_scale(), y.0..y.1),
                (_, Scale::Log) => self.draw(&root, x.0..x.1, (y.0..y.1).log_scale()),
                _ => self.draw(&root, x.0..x.1, y.0..y.1),
            }
            root.present().expect("finish an SVG string");
        }
        svg
    }

    /// The drawn range of one axis, padded: from 0 (or below, if a value is) on a linear axis,
    /// a factor of 1.3 either side on a log one, half a category either side on an ordinal one.
    fn range(&self, x: bool) -> (f64, f64) {
        let mut values = Vec::new();
        for layer in &self.layers {
            match (layer, x) {
                (Layer::Band(_, r), true) => values.extend(r.iter().map(|p| p.0)),
                (Layer::Band(_, r), false) => values.extend(r.iter().flat_map(|p| [p.1, p.2])),
                (Layer::Points(_, p) | Layer::Law(_, p), _) => {
                    values.extend(p.iter().map(|p| if x { p.0 } else { p.1 }))
                }
                (Layer::Level(_, v), false) | (Layer::Mark(_, v), true) => values.push(*v),
                _ => {}
            }
        }
        let has_points = self
            .layers
            .iter()
            .any(|l| matches!(l, Layer::Points(_, p) if !p.is_empty()));
        assert!(has_points, "figure {}: no points to draw", self.name);
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let axis = if x { &self.x } else { &self.y };
        match &axis.scale {
            Scale::Ordinal(labels) => (-0.5, labels.len().max(1) as f64 - 0.5),
            Scale::Log => {
                assert!(
                    lo > 0.0,
                    "figure {}: a log axis cannot show {lo}",
                    self.name
                );
                (lo / 1.3, hi * 1.3)
            }
            Scale::Linear => {
                let lo = lo.min(0.0);
                let pad = (hi - lo).max(1.0) * 0.04;
                (lo - if x { pad } else { 0.0 }, hi + pad)
            }
        }
    }

    fn draw<X, Y>(&self, root: &DrawingArea<SVGBackend<'_>, Shift>, x: X, y: Y)
    where
        X: AsRangedCoord<Value = f64>,
        X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(46)
            .y_label_area_size(80)
            .build_cartesian_2d(x, y)
            .expect("an SVG chart");
        let ordinal = match &self.x.scale {
            Scale::Ordinal(labels) => Some(labels.clone()),
            _ => None,
        };
        let (x_format, y_format) = (self.x.format, self.y.format);
        let x_label = |v: &f64| match &ordinal {
            Some(labels) => {
                let i = v.round();
                let on_tick = (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len();
                if on_tick {
                    labels[i as usize].clone()
                } else {
                    String::new()
                }
            }
            None => x_format(*v),
        };
        let y_label = |v: &f64| y_format(*v);
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(&self.x.label)
            .y_desc(&self.y.label)
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .light_line_style(WHITE.mix(0.0));
        if let Some(labels) = &ordinal {
            mesh.x_labels(labels.len());
        }
        mesh.draw().expect("an SVG mesh");
        let (x_lo, x_hi) = {
            let r = chart.plotting_area().get_x_range();
            (r.start, r.end)
        };
        let (y_lo, y_hi) = {
            let r = chart.plotting_area().get_y_range();
            (r.start, r.end)
        };
        let mut series = SERIES.iter().cycle();
        for layer in &self.layers {
            draw_layer(&mut chart, layer, &mut series, (x_lo, x_hi), (y_lo, y_hi));
        }
        chart
            .configure_series_labels()
            .position(self.legend.clone())
            .label_font(("sans-serif", 14))
            .border_style(BLACK.mix(0.4))
            .background_style(WHITE.mix(0.9))
            .draw()
            .expect("an SVG legend");
    }

    /// Holds the committed file `chapters/figures/NAME.svg` to what this run draws: `Current`
    /// if equal; if not, rewritten (`Redrawn`) when the command runs in [`redraw_figures`]
    /// mode, otherwise an error (keeps I2).
    pub fn publish(&self) -> Result<Published, Stale> {
        publish_in(
            Path::new(FIGURES_DIR),
            &self.name,
            &self.svg(),
            REDRAW.load(Ordering::SeqCst),
        )
    }

    /// Writes the figure of a run-specific run beside the measured values
    /// (`chapters/measured/NAME.svg`, never committed) and returns the Markdown that shows it
    /// from a measured include.
    pub fn record_measured(&self) -> std::io::Result<String> {
        let dir = Path::new(super::measured::MEASURED_DIR);
        fs::create_dir_all(dir)?;
        fs::write(dir.join(format!("{}.svg", self.name)), self.svg())?;
        Ok(format!("![{}](measured/{}.svg)\n", self.title, self.name))
    }
}

/// Draws one layer; `series` hands out the next run's colour.
fn draw_layer<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    layer: &Layer,
    series: &mut impl Iterator<Item = &'static RGBColor>,
    (x_lo, x_hi): (f64, f64),
    (y_lo, y_hi): (f64, f64),
) where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let dashed = |points: Vec<(f64, f64)>, colour: RGBColor| {
        DashedLineSeries::new(points, 6, 4, colour.stroke_width(2))
    };
    let stroke = |colour: RGBColor| {
        move |(x, y): (i32, i32)| {
            PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
        }
    };
    match layer {
        Layer::Band(label, ranges) => {
            let colour = SERIES[0];
            let outline: Vec<(f64, f64)> = ranges
                .iter()
                .map(|&(x, _, hi)| (x, hi))
                .chain(ranges.iter().rev().map(|&(x, lo, _)| (x, lo)))
                .collect();
            chart
                .draw_series(std::iter::once(Polygon::new(
                    outline,
                    colour.mix(0.15).filled(),
                )))
                .expect("an SVG band")
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 18, y + 5)], colour.mix(0.25).filled())
                });
        }
        Layer::Points(label, points) => {
            let colour = *series.next().expect("a cycle never ends");
            let radius = if points.len() > 40 { 2 } else { 4 }; // many points: smaller dots
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
                .expect("an SVG line")
                .label(label)
                .legend(move |(x, y)| {
                    EmptyElement::at((x + 9, y))
                        + PathElement::new(vec![(-9, 0), (9, 0)], colour.stroke_width(2))
                        + Circle::new((0, 0), 3, colour.filled())
                });
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&p| Circle::new(p, radius, colour.filled())),
                )
                .expect("SVG points");
        }
        Layer::Law(label, points) => {
            chart
                .draw_series(dashed(points.clone(), LAW))
                .expect("an SVG law")
                .label(label)
                .legend(stroke(LAW));
        }
        Layer::Level(label, y) => {
            chart
                .draw_series(dashed(vec![(x_lo, *y), (x_hi, *y)], LEVEL))
                .expect("an SVG level")
                .label(label)
                .legend(stroke(LEVEL));
        }
        Layer::Mark(label, x) => {
            chart
                .draw_series(dashed(vec![(*x, y_lo), (*x, y_hi)], MARK))
                .expect("an SVG mark")
                .label(label)
                .legend(stroke(MARK));
        }
    }
}

/// What [`Figure::publish`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// The committed file is what this run draws.
    Current,
    /// The file differed (or was missing) and was rewritten: review its diff.
    Redrawn,
}

/// A committed figure that is not what its run draws. Its `Debug` is its message, so the
/// `.unwrap()` in a chapter's block says what to do.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is stale: this run draws it differently (or it is missing). Run `cargo run` to redraw \
     it, then review the diff",
    .path.display()
)]
pub struct Stale {
    /// The committed file.
    pub path: PathBuf,
}

impl std::fmt::Debug for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

static REDRAW: AtomicBool = AtomicBool::new(false);
static REDRAWN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Switches [`Figure::publish`] from checking to rewriting, for the rest of the process. The
/// `controlloop` command calls it before it runs the experiments.
pub fn redraw_figures() {
    REDRAW.store(true, Ordering::SeqCst);
}

/// The figures this process rewrote, in the order it rewrote them.
pub fn redrawn() -> Vec<PathBuf> {
    REDRAWN.lock().expect("the list is never poisoned").clone()
}

/// [`Figure::publish`] against a folder, with the mode given: testable without the process flag.
fn publish_in(dir: &Path, name: &str, svg: &str, redraw: bool) -> Result<Published, Stale> {
    let path = dir.join(format!("{name}.svg"));
    if fs::read_to_string(&path).is_ok_and(|committed| committed == svg) {
        return Ok(Published::Current);
    }
    if !redraw {
        return Err(Stale { path });
    }
    fs::create_dir_all(dir)
        .and_then(|()| fs::write(&path, svg))
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    REDRAWN
        .lock()
        .expect("the list is never poisoned")
        .push(path);
    Ok(Published::Redrawn)
}

#[cfg(test)]
mod tests;
