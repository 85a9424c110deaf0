"""The verifier's harness: how a check calls a kernel under controlled conditions.

- `isolation`: each group of runtime checks runs in a forked child (`run_isolated`); a `Probe`
  in shared memory says what the child was doing when it crashed or hung.
- `memory`: where a call's buffers go: canary-padded heap buffers at random misalignments
  (`HeapMem`), or mappings flush against PROT_NONE guard pages (`GuardedRegion`, `GuardMem`).
- `trampoline`: the C harness' ABI trampoline (`call`, `describe`, `TrampolineCaller`): seeded
  callee-saved registers, stack arguments and machine state checked around one call.
- `scene`: calling a function by parameter name through its signature (`invoke`), and the
  `Scene` a family's checks describe one realistic use of a function with, which the ABI,
  guard-page and simulator checks replay under their own memory and caller.

The C side (harness.c: trampoline, planted faults, fault handler, CBC Monte-Carlo loops) is
built and loaded by `aesgen.verify.build.harness()`.
"""
