//! Sorted String Tables: Basalt's one columnar on-disk format.
