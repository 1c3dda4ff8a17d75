"""On-demand benchmarks (not collected by pytest): `python -m tests.benchmarks.bench_serve`."""
