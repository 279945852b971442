//! The figure type's unit tests: what a drawing holds, and the staleness check firing.

use super::*;

fn sample() -> Figure {
    Figure::new("sample", "a sample")
        .x("writes", Scale::Linear, plain)
        .y("reconciles", Scale::Linear, plain)
        .band(
            "the band",
            vec![(100.0, 3.0, 12.0), (200.0, 5.0, 22.0), (400.0, 10.0, 42.0)],
        )
        .points(
            "first run",
            vec![(100.0, 6.0), (200.0, 11.0), (400.0, 21.0)],
        )
        .points(
            "second run",
            vec![(100.0, 5.0), (200.0, 10.0), (400.0, 20.0)],
        )
        .law("span / cost + 1", vec![(100.0, 5.95), (400.0, 20.95)])
        .level("a ceiling", 30.0)
        .mark("a bend", 300.0)
}

#[test]
fn ticks_print_as_people_read_them() {
    assert_eq!(plain(200.0), "200");
    assert_eq!(plain(0.1 + 0.2), "0.3");
    assert_eq!(plain(-1.0), "-1");
    assert_eq!(seconds(0.005), "5 ms");
    assert_eq!(seconds(2.0), "2 s");
    assert_eq!(seconds(1000.0), "16 min 40 s");
    assert_eq!(seconds(120.0), "2 min");
}

#[test]
fn a_figure_draws_every_layer_the_same_way_every_time() {
    let svg = sample().svg();
    assert_eq!(svg, sample().svg(), "drawing must be deterministic (I1)");
    for label in [
        "a sample",
        "the band",
        "first run",
        "second run",
        "span / cost + 1",
        "a ceiling",
        "a bend",
        "writes",
        "reconciles",
    ] {
        assert!(svg.contains(label), "no {label:?} in the SVG");
    }
    assert_eq!(svg.matches("<polygon").count(), 1, "one shaded band");
    // Six points, plus one in each of the two series' legend swatches.
    assert_eq!(svg.matches("<circle").count(), 8);
    // The two series are drawn in two colours.
    for RGBColor(r, g, b) in &SERIES[..2] {
        let colour = format!("#{r:02X}{g:02X}{b:02X}");
        assert!(svg.contains(&colour), "no series in {colour}");
    }
}

#[test]
fn an_ordinal_axis_labels_its_categories_and_a_log_axis_its_decades() {
    let labels = vec!["0 ms".to_owned(), "20 ms".into(), "100 ms".into()];
    let svg = Figure::new("ordinal", "t")
        .x("cost", Scale::Ordinal(labels.clone()), plain)
        .y("delay", Scale::Log, seconds)
        .points("run", vec![(0.0, 0.005), (1.0, 1.0), (2.0, 1000.0)])
        .svg();
    for l in &labels {
        assert!(svg.contains(&format!("\n{l}\n")), "no tick {l}");
    }
    for tick in ["10 ms", "1 s", "1 min 40 s"] {
        assert!(svg.contains(&format!("\n{tick}\n")), "no tick {tick}");
    }
}

#[test]
#[should_panic(expected = "figure log: a log axis cannot show 0")]
fn a_log_axis_refuses_zero() {
    Figure::new("log", "t")
        .y("delay", Scale::Log, seconds)
        .points("run", vec![(1.0, 0.0), (2.0, 1.0)])
        .svg();
}

#[test]
#[should_panic(expected = "figure empty: no points to draw")]
fn a_figure_without_points_is_refused() {
    Figure::new("empty", "t").level("a ceiling", 1.0).svg();
}

#[test]
fn publish_checks_and_only_the_command_rewrites() {
    let dir = std::env::temp_dir().join(format!("plot-publish-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let svg = sample().svg();

    // Missing: stale under a test, drawn by the command.
    let stale = publish_in(&dir, "sample", &svg, false).unwrap_err();
    assert_eq!(stale.path, dir.join("sample.svg"));
    assert!(
        stale.to_string().ends_with(
            "sample.svg is stale: this run draws it differently (or it is missing). Run \
             `cargo run` to redraw it, then review the diff"
        ),
        "{stale}"
    );
    assert!(
        !dir.join("sample.svg").exists(),
        "a check never writes (I2)"
    );
    assert_eq!(
        publish_in(&dir, "sample", &svg, true),
        Ok(Published::Redrawn)
    );
    assert!(redrawn().contains(&dir.join("sample.svg")));
    assert_eq!(
        publish_in(&dir, "sample", &svg, false),
        Ok(Published::Current)
    );

    // A run that draws differently (here: one point moved) makes the committed file stale.
    let moved = sample().points("third run", vec![(100.0, 7.0)]).svg();
    assert!(publish_in(&dir, "sample", &moved, false).is_err());
    assert_eq!(
        fs::read_to_string(dir.join("sample.svg")).unwrap(),
        svg,
        "unchanged by the check"
    );
    fs::remove_dir_all(dir).unwrap();
}
