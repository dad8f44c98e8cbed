"""Speed benchmarks that print figures (never asserted in tests)."""
