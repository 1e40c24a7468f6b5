//! Pyroscope's read routes (`/pyroscope/render`, `/pyroscope/render-diff`); filled in by the query layer's move.
