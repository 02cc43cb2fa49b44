//! ordo-report: renders any ordo result as a self-contained HTML page (inline SVG) or terminal tables.
