//! A recording fake of the runtime, for unit tests.
