"""aesgen: generator of tuned, verified x86-64 AES kernels."""
__version__ = "0.1.0"
