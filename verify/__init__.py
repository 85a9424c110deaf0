"""Runtime verification of generated kernels: known answers, differential, ABI, guard pages."""
from aesgen.verify.results import CheckResult
from aesgen.verify.runner import verify_kernel

__all__ = ["CheckResult", "verify_kernel"]
