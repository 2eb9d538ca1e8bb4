//! `report DIR [--against OLD]`: merges `DIR/bench.json` (ours) and `DIR/peers.json` (peers.py) into
//! `report.json`, `report.md` (ours vs each peer per shape, ratio, % of roofline) and one SVG per op
//! (`plot-<op>.svg`: throughput vs problem size, ours and each peer, the roofline as a line). With
//! `--against OLD` it also diffs the two runs per (call, implementation): `diff.md`, regressions
//! beyond the noise band flagged (exit status 1 when any).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::BoxError;
use crate::schema::{BenchFile, OURS, PEAK_TFLOPS, Row};

/// The best (fastest) row of each (call name, implementation); error rows are dropped.
pub fn best_rows(rows: &[Row]) -> BTreeMap<(String, String), Row> {
    let mut m: BTreeMap<(String, String), Row> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.error.is_none() && r.median_us > 0.0)
    {
        let k = (r.name.clone(), r.implementation.clone());
        if m.get(&k).is_none_or(|o| r.median_us < o.median_us) {
            m.insert(k, r.clone());
        }
    }
    m
}

/// Ours and peers, merged: every row of both.
pub fn merge(ours: &BenchFile, peers: Option<&BenchFile>) -> BenchFile {
    let mut f = BenchFile::new("report", ours.env.clone());
    if let Some(p) = peers {
        for (k, v) in &p.env.notes {
            f.env.notes.insert(format!("peers.{k}"), v.clone());
        }
    }
    f.rows = ours.rows.clone();
    if let Some(p) = peers {
        f.rows.extend(p.rows.iter().cloned());
    }
    f
}

/// The markdown table: per call, ours, then each peer with its time, throughput and ours/peer speed
/// ratio (>1: ours faster), and % of roofline.
pub fn markdown(f: &BenchFile) -> String {
    let best = best_rows(&f.rows);
    let impls: BTreeSet<String> = best
        .keys()
        .map(|(_, i)| i.clone())
        .filter(|i| i != OURS)
        .collect();
    let mut s = format!(
        "# GPU bench report\n\n{} ({}), driver {}, SM clock {} / {} MHz, power limit {} W\n\n\
         Roofline: {:.0} GB/s copy bandwidth ({}), {PEAK_TFLOPS} TFLOP/s dense bf16. \
         Ratio = peer time / our time (> 1: ours faster).\n\n",
        f.env.device,
        f.env.arch,
        f.env.driver.as_deref().unwrap_or("?"),
        opt(f.env.sm_clock_mhz),
        opt(f.env.max_sm_clock_mhz),
        opt(f.env.power_limit_w),
        f.env.copy_roofline_gbps(),
        if f.env.copy_gbps.is_some() {
            "measured in this run"
        } else {
            "the H200's, not measured in this run"
        },
    );
    s.push_str("| call | ours µs | ours | % roofline |");
    for i in &impls {
        s.push_str(&format!(" {i} | ratio |"));
    }
    s.push_str("\n|---|---|---|---|");
    for _ in &impls {
        s.push_str("---|---|");
    }
    s.push('\n');
    let names: Vec<String> = {
        let mut seen = BTreeSet::new();
        f.rows
            .iter()
            .filter(|r| seen.insert(r.name.clone()))
            .map(|r| r.name.clone())
            .collect()
    };
    for name in names {
        let ours = best.get(&(name.clone(), OURS.to_string()));
        match ours {
            Some(o) => s.push_str(&format!(
                "| {name} | {:.2} | {:.1} {} | {:.0}% |",
                o.median_us,
                o.throughput,
                o.unit,
                100.0 * o.roofline_fraction(&f.env)
            )),
            None => s.push_str(&format!("| {name} | — | — | — |")),
        }
        for i in &impls {
            match best.get(&(name.clone(), i.clone())) {
                Some(p) => {
                    let ratio = ours.map(|o| p.median_us / o.median_us);
                    s.push_str(&format!(
                        " {:.1} {} | {} |",
                        p.throughput,
                        p.unit,
                        ratio.map_or("—".into(), |r| format!("{r:.2}×"))
                    ));
                }
                None => s.push_str(" — | — |"),
            }
        }
        s.push('\n');
    }
    let errors: Vec<&Row> = f.rows.iter().filter(|r| r.error.is_some()).collect();
    if !errors.is_empty() {
        s.push_str("\nRows not measured:\n\n");
        for r in errors {
            s.push_str(&format!(
                "- {} ({}): {}\n",
                r.name,
                r.implementation,
                r.error.as_deref().unwrap_or("")
            ));
        }
    }
    s
}

fn opt(v: Option<f64>) -> String {
    v.map_or("?".into(), |v| format!("{v:.0}"))
}

/// Implementations in the order of their fixed plot colours, so one implementation has the same colour
/// in every plot (an unknown one takes the colours after these).
const IMPL_ORDER: [&str; 6] = ["cutile", "cublas", "cudnn", "flash", "torch", "triton"];

/// The colour of a series `"<impl> <dtype>"`: one hue per implementation, lighter for f16 and f32
/// than for bf16, so the dtypes of one implementation read as one family.
fn series_color(series: &str) -> plotters::style::RGBAColor {
    use plotters::style::{Color, Palette, Palette99};
    let mut parts = series.split(' ');
    let (imp, dtype) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let hue = IMPL_ORDER
        .iter()
        .position(|&i| i == imp)
        .unwrap_or_else(|| IMPL_ORDER.len() + imp.bytes().map(usize::from).sum::<usize>() % 8);
    let alpha = match dtype {
        "f16" => 0.6,
        "f32" => 0.35,
        _ => 1.0,
    };
    Palette99::pick(hue).mix(alpha)
}

/// One SVG per op: throughput vs problem size (bytes or flops, log scale), one series per
/// implementation and element type (a line never joins two dtypes), the roofline as a horizontal line.
/// Returns the written paths.
pub fn plots(f: &BenchFile, dir: &Path) -> Result<Vec<PathBuf>, BoxError> {
    use plotters::prelude::*;
    let best = best_rows(&f.rows);
    let mut by_op: BTreeMap<String, BTreeMap<String, Vec<(f64, f64)>>> = BTreeMap::new();
    let mut units: BTreeMap<String, String> = BTreeMap::new();
    for r in best.values().filter(|r| r.size() > 0.0) {
        by_op
            .entry(r.op.clone())
            .or_default()
            .entry(format!("{} {}", r.implementation, r.dtype))
            .or_default()
            .push((r.size(), r.throughput));
        units.insert(r.op.clone(), r.unit.clone());
    }
    let mut out = Vec::new();
    for (op, series) in by_op {
        let unit = units.get(&op).cloned().unwrap_or_default();
        let roof = f.env.roofline(&unit);
        let xs: Vec<f64> = series.values().flatten().map(|p| p.0).collect();
        let (lo, hi) = xs
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        let (lo, hi) = (lo / 2.0, hi * 2.0);
        let path = dir.join(format!("plot-{op}.svg"));
        {
            let root = SVGBackend::new(&path, (900, 540)).into_drawing_area();
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(format!("{op}: {unit} vs problem size"), ("sans-serif", 22))
                .margin(12)
                .x_label_area_size(44)
                .y_label_area_size(64)
                .build_cartesian_2d((lo..hi).log_scale(), 0.0..roof * 1.1)?;
            chart
                .configure_mesh()
                .x_desc(if unit == "GB/s" {
                    "bytes moved"
                } else {
                    "flops"
                })
                .y_desc(unit.as_str())
                .x_label_formatter(&|x| format!("{x:.0e}"))
                .draw()?;
            chart
                .draw_series(LineSeries::new(
                    vec![(lo, roof), (hi, roof)],
                    BLACK.stroke_width(1),
                ))?
                .label(format!("roofline {roof}"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
            for (imp, mut pts) in series {
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let color = series_color(&imp);
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                    .label(imp)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
                chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
            root.present()?;
        }
        out.push(path);
    }
    Ok(out)
}

/// One (call, implementation) compared between two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffRow {
    pub name: String,
    pub implementation: String,
    pub old_us: f64,
    pub new_us: f64,
    /// new time / old time (> 1: slower now).
    pub ratio: f64,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Regression,
    Improvement,
    Noise,
}

/// Pairs the rows of two runs and classifies each against the noise band (`band` = 0.05 for ±5%).
pub fn diff(old: &BenchFile, new: &BenchFile, band: f64) -> Vec<DiffRow> {
    let (o, n) = (best_rows(&old.rows), best_rows(&new.rows));
    n.iter()
        .filter_map(|(k, nr)| {
            let or = o.get(k)?;
            let ratio = nr.median_us / or.median_us;
            let verdict = if ratio > 1.0 + band {
                Verdict::Regression
            } else if ratio < 1.0 / (1.0 + band) {
                Verdict::Improvement
            } else {
                Verdict::Noise
            };
            Some(DiffRow {
                name: k.0.clone(),
                implementation: k.1.clone(),
                old_us: or.median_us,
                new_us: nr.median_us,
                ratio,
                verdict,
            })
        })
        .collect()
}

/// The diff as markdown.
pub fn diff_markdown(rows: &[DiffRow], band: f64) -> String {
    let mut s = format!(
        "# Diff against the older run (noise band ±{:.0}%)\n\n| call | impl | old µs | new µs | new/old | verdict |\n|---|---|---|---|---|---|\n",
        band * 100.0
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {:.3} | {} |\n",
            r.name,
            r.implementation,
            r.old_us,
            r.new_us,
            r.ratio,
            match r.verdict {
                Verdict::Regression => "**REGRESSION**",
                Verdict::Improvement => "faster",
                Verdict::Noise => "",
            }
        ));
    }
    s
}

/// `report DIR [--against OLD] [--noise 0.05]`.
pub fn report(dir: &Path, against: Option<&Path>, band: f64) -> Result<ExitCode, BoxError> {
    let ours_path = dir.join("bench.json");
    let merged = if ours_path.is_file() {
        let ours = BenchFile::read(&ours_path)?;
        let peers_path = dir.join("peers.json");
        let peers = if peers_path.is_file() {
            Some(BenchFile::read(&peers_path)?)
        } else {
            println!("no {} (peers not run); ours only", peers_path.display());
            None
        };
        merge(&ours, peers.as_ref())
    } else {
        // A saved report re-rendered.
        BenchFile::read(&dir.join("report.json"))?
    };
    merged.write(&dir.join("report.json"))?;
    let md = markdown(&merged);
    std::fs::write(dir.join("report.md"), &md)?;
    println!("{md}");
    for p in plots(&merged, dir)? {
        println!("plot: {}", p.display());
    }
    let mut code = ExitCode::SUCCESS;
    if let Some(old_dir) = against {
        let old = read_any(old_dir)?;
        let rows = diff(&old, &merged, band);
        let md = diff_markdown(&rows, band);
        std::fs::write(dir.join("diff.md"), &md)?;
        println!("{md}");
        let regressions = rows
            .iter()
            .filter(|r| r.verdict == Verdict::Regression)
            .count();
        println!(
            "{} rows compared, {regressions} regressions beyond ±{:.0}%",
            rows.len(),
            band * 100.0
        );
        if regressions > 0 {
            code = ExitCode::FAILURE;
        }
    }
    println!("report: {}", dir.join("report.md").display());
    Ok(code)
}

/// `report.json` of a folder, else its `bench.json` (+ `peers.json`).
fn read_any(dir: &Path) -> Result<BenchFile, BoxError> {
    let r = dir.join("report.json");
    if r.is_file() {
        return BenchFile::read(&r);
    }
    let ours = BenchFile::read(&dir.join("bench.json"))?;
    let p = dir.join("peers.json");
    let peers = if p.is_file() {
        Some(BenchFile::read(&p)?)
    } else {
        None
    };
    Ok(merge(&ours, peers.as_ref()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_implementation_keeps_its_hue_across_dtypes_and_plots() {
        use plotters::style::Color;
        let rgb = |s: &str| series_color(s).rgb();
        assert_eq!(rgb("cutile bf16"), rgb("cutile f32"));
        assert_ne!(rgb("cutile bf16"), rgb("triton bf16"));
        assert_ne!(rgb("torch f16"), rgb("cublas f16"));
        assert!(series_color("cutile f32").alpha() < series_color("cutile bf16").alpha());
    }

    use super::*;

    fn golden() -> BenchFile {
        BenchFile::parse(include_str!("../tests/golden/bench-v1.json")).expect("golden")
    }

    #[test]
    fn diff_flags_regressions_beyond_the_band() {
        let old = golden();
        let mut new = old.clone();
        new.rows[0].median_us *= 1.10; // ours softmax 10% slower
        new.rows[1].median_us *= 1.03; // torch within noise
        new.rows[2].median_us *= 0.80; // gemm faster
        let d = diff(&old, &new, 0.05);
        assert_eq!(d.len(), 3);
        let by = |n: &str, i: &str| {
            d.iter()
                .find(|r| r.name.starts_with(n) && r.implementation == i)
                .expect("row")
        };
        assert_eq!(by("softmax", "cutile").verdict, Verdict::Regression);
        assert!((by("softmax", "cutile").ratio - 1.10).abs() < 1e-9);
        assert_eq!(by("softmax", "torch").verdict, Verdict::Noise);
        assert_eq!(by("gemm", "cutile").verdict, Verdict::Improvement);
        // A wider band swallows the 10%.
        assert!(
            diff(&old, &new, 0.15)
                .iter()
                .all(|r| r.verdict != Verdict::Regression)
        );
        assert!(diff_markdown(&d, 0.05).contains("REGRESSION"));
    }

    #[test]
    fn markdown_pairs_ours_with_peers() {
        let md = markdown(&golden());
        let line = md
            .lines()
            .find(|l| l.starts_with("| softmax bf16"))
            .expect("softmax line");
        // torch 255 µs vs ours 70 µs.
        assert!(line.contains("3.64×"), "{line}");
        assert!(md.contains("| torch | ratio |"));
    }

    #[test]
    fn the_roofline_is_the_runs_measured_copy_bandwidth() {
        let mut f = golden();
        let pct = |md: &str| {
            let line = md
                .lines()
                .find(|l| l.starts_with("| softmax bf16"))
                .expect("softmax line")
                .to_string();
            line.split('|').nth(4).expect("% column").trim().to_string()
        };
        let ours = f
            .rows
            .iter()
            .find(|r| r.name.starts_with("softmax bf16") && r.implementation == OURS)
            .expect("our softmax row")
            .throughput;
        // A file without a measured copy bandwidth falls back to the H200's, and says so.
        f.env.copy_gbps = None;
        let md = markdown(&f);
        assert!(md.contains("not measured in this run"), "{md}");
        assert_eq!(
            pct(&md),
            format!("{:.0}%", 100.0 * ours / crate::schema::H200_COPY_GBPS)
        );
        // A measured one (an H100's, say) is the base of the % column.
        f.env.copy_gbps = Some(2900.0);
        let md = markdown(&f);
        assert!(
            md.contains("2900 GB/s copy bandwidth (measured in this run)"),
            "{md}"
        );
        assert_eq!(pct(&md), format!("{:.0}%", 100.0 * ours / 2900.0));
    }

    #[test]
    fn plots_render_svg_with_text() {
        let dir = tempfile::tempdir().expect("tmp");
        let paths = plots(&golden(), dir.path()).expect("plots");
        assert_eq!(paths.len(), 2);
        let svg = std::fs::read_to_string(&paths[1]).expect("svg");
        assert!(svg.contains("<svg") && svg.contains("<text"), "{svg}");
        assert!(svg.contains("softmax"));
    }

    #[test]
    fn report_rerenders_a_saved_folder() {
        let dir = tempfile::tempdir().expect("tmp");
        golden()
            .write(&dir.path().join("report.json"))
            .expect("write");
        report(dir.path(), None, 0.05).expect("report");
        assert!(dir.path().join("report.md").is_file());
        assert!(dir.path().join("plot-gemm.svg").is_file());
    }
}
