//! Micro-benchmarks of the real machine. See issue "Micro-benchmarks of the real machine".
