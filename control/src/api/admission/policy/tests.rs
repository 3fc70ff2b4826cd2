//! Matching of policies and bindings, and the messages and failures of
//! evaluation.
