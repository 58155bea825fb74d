//! Plots of load per host over time, one panel per policy, as SVG (no font
//! files needed, so it works on any machine the broker runs on). Up to
//! `MAX_PLOTTED_HOSTS` hosts every host gets its own line; beyond, the
//! panel shows the hottest host (red), the 90th percentile (magenta), the
//! median (blue) and the coolest host (green) per minute. Long runs are
//! drawn with at most 160 points a line, each the peak of its minutes.
//! A comparison with a scaling plan draws, per policy, the hosts powered
//! all day (grey), the hosts powered under the plan (blue) and the
//! sessions under the plan (orange, right axis).

use std::path::Path;

use plotters::prelude::*;

use crate::SimError;
use crate::report::Report;

/// The most points one line of a panel has.
const MAX_POINTS: usize = 160;

/// Refuses a plot file that is not `.svg` (the message names `--plot`):
/// callers check before a long run, not after it.
pub fn check_path(path: &Path) -> Result<(), SimError> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
    {
        return Ok(());
    }
    Err(SimError::Invalid(format!(
        "--plot: {}: only SVG plots are written; name the file *.svg",
        path.display()
    )))
}

/// Writes the report's plot to `path` (an `.svg` file): CPU per host, or,
/// in a comparison with a scaling plan, the hosts powered and the sessions
/// over the day with and without the plan.
pub fn write_svg(report: &Report, path: &Path) -> Result<(), SimError> {
    check_path(path)?;
    let svg = if report.autoscale.is_empty() {
        render_svg(report)?
    } else {
        render_autoscale_svg(report)?
    };
    std::fs::write(path, svg).map_err(|e| SimError::Plot(format!("{}: {e}", path.display())))
}

/// The plot as an SVG document.
fn render_svg(report: &Report) -> Result<String, SimError> {
    let n = report.results.len().max(1);
    let cols = if n > 1 { 3.min(n) } else { 1 };
    let rows = n.div_ceil(cols);
    let (w, h) = (480 * cols as u32, 320 * rows as u32 + 40);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        let err = |e: &dyn std::fmt::Display| SimError::Plot(e.to_string());
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (title, body) = root.split_vertically(40);
        title
            .titled(
                &format!(
                    "CPU demand per host (% of its vCPUs), scenario {}, {} hosts, {} users, seed {}",
                    report.scenario, report.hosts, report.users, report.seed
                ),
                ("sans-serif", 18),
            )
            .map_err(|e| err(&e))?;
        let y_max = report
            .results
            .iter()
            .flat_map(|r| r.series.max.iter().copied())
            .fold(100.0f32, f32::max)
            .min(400.0);
        for (panel, r) in body.split_evenly((rows, cols)).iter().zip(&report.results) {
            let x_max = r.series.minute.last().copied().unwrap_or(1).max(1) as f32 / 60.0;
            let mut chart = ChartBuilder::on(panel)
                .caption(
                    format!("{} (peak {:.0} %)", r.policy, r.peak_cpu_percent),
                    ("sans-serif", 15),
                )
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(36)
                .build_cartesian_2d(0f32..x_max, 0f32..y_max)
                .map_err(|e| err(&e))?;
            chart
                .configure_mesh()
                .x_desc("hours")
                .light_line_style(WHITE)
                .draw()
                .map_err(|e| err(&e))?;
            // At most MAX_POINTS points a line: a day has 840 minutes. Each
            // point takes the highest (the lowest, for the coolest host) value
            // of its minutes, so no peak is lost.
            let k = r.series.minute.len().div_ceil(MAX_POINTS).max(1);
            let hours: Vec<f32> = r
                .series
                .minute
                .chunks(k)
                .map(|c| c[0] as f32 / 60.0)
                .collect();
            let line_by = |v: &[f32], low: bool| -> Vec<(f32, f32)> {
                let pick = |c: &[f32]| {
                    let finite = c.iter().copied().filter(|y| y.is_finite());
                    if low {
                        finite.reduce(f32::min)
                    } else {
                        finite.reduce(f32::max)
                    }
                };
                hours
                    .iter()
                    .zip(v.chunks(k))
                    .filter_map(|(&x, c)| pick(c).map(|y| (x, y.min(y_max))))
                    .collect()
            };
            let line = |v: &[f32]| line_by(v, false);
            if !r.host_series.is_empty() {
                for (i, s) in r.host_series.iter().enumerate() {
                    let color = Palette99::pick(i).mix(0.5);
                    chart
                        .draw_series(LineSeries::new(line(s), color.stroke_width(1)))
                        .map_err(|e| err(&e))?;
                }
            } else {
                for (v, color, low) in [
                    (&r.series.max, RED, false),
                    (&r.series.p90, MAGENTA, false),
                    (&r.series.p50, BLUE, false),
                    (&r.series.min, GREEN, true),
                ] {
                    let points = line_by(v, low);
                    chart
                        .draw_series(LineSeries::new(points, color.stroke_width(1)))
                        .map_err(|e| err(&e))?;
                }
            }
            chart
                .draw_series(LineSeries::new(
                    [(0.0, 100.0), (x_max, 100.0)],
                    BLACK.mix(0.4).stroke_width(1),
                ))
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

/// The autoscale plot: one panel per policy, its run without the plan and
/// its run with it (the report holds them in that order).
fn render_autoscale_svg(report: &Report) -> Result<String, SimError> {
    let runs: Vec<_> = report
        .results
        .iter()
        .filter_map(|r| r.power.as_ref().map(|p| (r, p)))
        .collect();
    let pairs: Vec<_> = runs
        .chunks(2)
        .filter(|c| c.len() == 2 && !c[0].1.scaling_plan && c[1].1.scaling_plan)
        .collect();
    let n = pairs.len().max(1);
    let cols = n.min(2);
    let rows = n.div_ceil(cols);
    let (w, h) = (560 * cols as u32, 340 * rows as u32 + 40);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        let err = |e: &dyn std::fmt::Display| SimError::Plot(e.to_string());
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (title, body) = root.split_vertically(40);
        title
            .titled(
                &format!(
                    "Hosts powered and sessions, scenario {}, {} hosts, {} users, seed {}, plan {}",
                    report.scenario,
                    report.hosts,
                    report.users,
                    report.seed,
                    report.scaling_plan.as_deref().unwrap_or_default()
                ),
                ("sans-serif", 16),
            )
            .map_err(|e| err(&e))?;
        let sessions_max = runs
            .iter()
            .flat_map(|(_, p)| p.sessions.iter().copied())
            .max()
            .unwrap_or(1)
            .max(1) as f32
            * 1.05;
        let hosts_max = report.hosts as f32 * 1.05;
        // The scenario starts at 06:00: hours on the axis are clock hours.
        const START_HOUR: f32 = 6.0;
        for (panel, pair) in body.split_evenly((rows, cols)).iter().zip(&pairs) {
            let (off, on) = (pair[0], pair[1]);
            let row = report.autoscale.iter().find(|x| x.policy == on.0.policy);
            let x_max = START_HOUR + off.1.minute.last().copied().unwrap_or(1).max(1) as f32 / 60.0;
            let mut chart = ChartBuilder::on(panel)
                .caption(
                    format!(
                        "{}: {:.0} host-hours always on, {:.0} under the plan ({:.1} % saved)",
                        off.0.policy,
                        off.1.host_hours,
                        on.1.host_hours,
                        row.map_or(0.0, |r| r.host_hours_saved_pct)
                    ),
                    ("sans-serif", 13),
                )
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(36)
                .right_y_label_area_size(44)
                .build_cartesian_2d(START_HOUR..x_max, 0f32..hosts_max)
                .map_err(|e| err(&e))?
                .set_secondary_coord(START_HOUR..x_max, 0f32..sessions_max);
            chart
                .configure_mesh()
                .x_desc("hour of the day (UTC)")
                .y_desc("hosts powered")
                .light_line_style(WHITE)
                .draw()
                .map_err(|e| err(&e))?;
            chart
                .configure_secondary_axes()
                .y_desc("sessions")
                .draw()
                .map_err(|e| err(&e))?;
            let points = |p: &crate::autoscale::PowerMeasures, v: &[u32]| -> Vec<(f32, f32)> {
                p.minute
                    .iter()
                    .zip(v)
                    .map(|(&m, &y)| (START_HOUR + m as f32 / 60.0, y as f32))
                    .collect()
            };
            chart
                .draw_series(LineSeries::new(
                    points(off.1, &off.1.powered_hosts),
                    BLACK.mix(0.4).stroke_width(2),
                ))
                .map_err(|e| err(&e))?
                .label("hosts powered, always on")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.mix(0.4)));
            chart
                .draw_series(LineSeries::new(
                    points(on.1, &on.1.powered_hosts),
                    BLUE.stroke_width(2),
                ))
                .map_err(|e| err(&e))?
                .label("hosts powered, plan")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLUE));
            let orange = RGBColor(230, 120, 0);
            chart
                .draw_secondary_series(LineSeries::new(
                    points(on.1, &on.1.sessions),
                    orange.stroke_width(1),
                ))
                .map_err(|e| err(&e))?
                .label("sessions, plan (right axis)")
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], orange));
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerMiddle)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK.mix(0.3))
                .label_font(("sans-serif", 11))
                .draw()
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}
