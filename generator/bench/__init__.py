"""`aesgen bench` and the measurements `explore`, `tune` and `demo` make: not verification.

- timing.py: time kernels against the peers (OpenSSL, intel-ipsec-mb) in one process, in
  GB/s, TSC ticks per byte and ratios; each figure next to its ceiling (`op_ceiling`).
- sampler.py: rounds over every configuration in turn, until each median is known to ±2%
  or a time budget ends; stats.py: the median's order-statistics interval, ties, the
  cheapest tie.
- ceiling.py: the machine's ceiling, measured: throughput and latency of vaesenc,
  vpclmulqdq and vgf2p8affineinvqb per width, and mixes of them as a stitched loop runs them.
- build.py: builds the C harness (bench.c, bench_peer_process.c, bench.h) and the
  measurement objects, cached with the verifier's builds (aesgen.verify.build).
"""
