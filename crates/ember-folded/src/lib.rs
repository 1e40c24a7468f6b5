//! The folded-stacks format (`frame;frame;frame count`): parsing, writing and
//! the differential (`before after`) three-column variant.

pub mod diff;
