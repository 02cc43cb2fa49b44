//! `"kind": "series"` (`ordo_results::series`): a generic result for measurements no other kind describes
//! — titled charts of named (x, y) series, plus tables and notes — so a bench/ script can put its curves (an
//! adaptive limit over time against the backend's knee, class shares per second) in `ordo report` without a
//! kind of its own. The producer says what the axes are; the report draws lines with markers on linear axes.

use ordo_results::series::SeriesResult;

use crate::doc::{Block, Section, Table};
use crate::svg::{Point, XyChart, XySeries};

pub fn summary(r: &SeriesResult) -> String {
    if r.subtitle.is_empty() {
        r.title.clone()
    } else {
        format!("{}: {}", r.title, r.subtitle)
    }
}

pub fn section(r: &SeriesResult, id: &str, name: &str) -> Section {
    let mut blocks: Vec<Block> = Vec::new();
    for (i, c) in r.charts.iter().enumerate() {
        let mut chart = XyChart::new(
            format!("{id}-chart{i}"),
            c.caption.clone(),
            c.x_label.clone(),
            c.y_label.clone(),
        );
        for s in &c.series {
            let pts = s.points.iter().map(|p| Point::new(p[0], p[1])).collect();
            let mut line = XySeries::line(s.name.clone(), pts);
            if s.dashed {
                line = line.dashed();
            }
            chart.series.push(line);
        }
        blocks.push(chart.into());
    }
    for t in &r.tables {
        let headers: Vec<&str> = t.headers.iter().map(String::as_str).collect();
        let mut table = Table::new(t.title.clone(), &headers);
        for row in &t.rows {
            table.row(row.clone());
        }
        blocks.push(table.into());
    }
    blocks.extend(r.notes.iter().cloned().map(Block::Note));
    Section {
        id: id.to_string(),
        title: format!("{} ({name})", r.title),
        subtitle: r.subtitle.clone(),
        blocks,
    }
}

#[cfg(test)]
mod tests {
    use crate::inputs::{InputData, parse};

    #[test]
    fn a_series_document_becomes_charts_tables_and_notes() {
        let doc = br#"{"kind": "series", "version": 1, "title": "Adaptive limit", "subtitle": "64 -> 16",
            "charts": [{"caption": "Limit over time.", "x_label": "time (s)", "y_label": "requests",
                        "series": [{"name": "limit", "points": [[0, 2], [1.5, 64]]},
                                   {"name": "knee", "points": [[0, 64], [1.5, 64]], "dashed": true}]}],
            "tables": [{"title": "Targets", "headers": ["what", "value"], "rows": [["settle", "0.8 s"]]}],
            "notes": ["one run"]}"#;
        let input = parse("limit.json", doc).unwrap();
        let InputData::Series(r) = &input.data else {
            panic!("{:?}", input.kind())
        };
        assert_eq!(r.charts[0].series[1].points[1], [1.5, 64.0]);
        let sections = input.sections("s0");
        assert_eq!(sections[0].figure_count(), 1);
        assert_eq!(sections[0].blocks.len(), 3);
        let page = crate::render_html(std::slice::from_ref(&input));
        assert!(page.contains("Limit over time.") && page.contains("data-y=\"64\""));
        assert!(crate::render_text(&[input]).contains("settle"));
        let e = parse(
            "x.json",
            br#"{"kind": "series", "version": 1, "title": "t", "charts": [{}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("x.json: corrupt series result: charts[0]: missing field `caption`"),
            "{e}"
        );
    }
}
