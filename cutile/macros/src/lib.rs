//! Procedural macros of the cutile DSL (not yet implemented: see issue "The kernel DSL").
