//! Sink: folded stacks → interactive flame graph SVG (plain and differential).
