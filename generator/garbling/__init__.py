"""Garbled circuits end to end: Boolean circuits as data (the Bristol Fashion format), circuits built
from aesgen's own definitions (AES-128 with its key expansion, adders, multipliers), the AND-depth
layering the static batching needs, and the driver that garbles and evaluates a circuit with the
generated half-gates kernels in batches (static: by AND-depth layer; dynamic: deferred execution).
"""
