//! Scaling laws (Amdahl, Gustafson, Karp–Flatt, USL) following J. Végh's reading of Amdahl's law.

pub mod laws;
