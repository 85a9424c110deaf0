"""Runtime verification of generated kernels: known answers, differential, ABI, guard pages."""
from aesgen.verify.runner import CheckResult, verify_kernel

__all__ = ["CheckResult", "verify_kernel"]
