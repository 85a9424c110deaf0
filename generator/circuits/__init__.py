"""Circuit compilers: a Boolean circuit (aesgen.kernels.circuits) to machine-level programs on
vector registers — three-operand (AVX/AVX2/AVX-512), two-operand (SSE) and ternlog-fused (AVX-512)."""
