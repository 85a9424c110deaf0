"""What the AEAD families' checks share (GCM, GCM-SIV, OCB, OTR and the hashes GHASH, POLYVAL).

- the lengths a differential sweeps (`text_lengths`, `aad_len`);
- how one call is judged against the reference (`aead_errors`, `sealed_mismatch`), or judged as
  refused (`refusal_errors`);
- the check bodies whose loop is the same for several families, given the family's own calls:
  `diff_aead` (encryption or decryption vs the reference), `tamper` (a flipped bit is refused and the output
  zeroed), `diff_hash` (an accumulating hash in one call and continued over two),
  `check_key_sizes` (key setup refuses bad sizes), `check_refusals` (bad arguments are refused);
- `hash_scene_call`, the ABI/guard/simulator scene of a hash once its key is chosen.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from aesgen.functions import FUNCTIONS
from aesgen.verify import signatures
from aesgen.verify.build import Kernel
from aesgen.verify.harness.isolation import Probe
from aesgen.verify.harness.memory import HeapMem, Region
from aesgen.verify.harness.scene import Invocation, Scene, invoke, key_or_raise, make_key, out_if_placed
from aesgen.verify.results import CheckResult, first_diff, verdict

def text_lengths(n: int, quick: bool, rng: random.Random) -> list[int]:
    """Every byte length 0..16n+15 (quick: every tail at 0, 1 and n blocks plus a sample)."""
    top = 16 * n + 16
    if not quick:
        return list(range(top))
    dense = {16 * k + r for k in (0, 1, n) for r in range(16)}
    rest = [x for x in range(top) if x not in dense]
    return sorted(dense | set(rng.sample(rest, min(len(rest), 4 * n))))


def aad_len(i: int, n: int, rng: random.Random) -> int:
    """0, whole blocks, and non-multiples of 16 up to 16n+15."""
    kind = i % 4
    if kind == 0:
        return 0
    if kind == 1:
        return 16 * rng.randrange(0, n + 1)
    return rng.randrange(0, 16 * n + 16)


def aead_errors(inv, decrypt: bool, what: str, pt: bytes, ct: bytes, tag: bytes, oracle: str = "") -> list[str]:
    """What an AEAD call did wrong against the reference: return value, text, tag, damage."""
    errors: list[str] = []
    if decrypt:
        if inv.ret != 0:
            errors.append(f"{what}: returned {inv.ret} for a valid tag")
        elif inv.out("out") != pt:
            errors.append(f"{what}: plaintext {first_diff(inv.out('out'), pt)}")
    elif inv.ret != 0:
        errors.append(f"{what}: returned {inv.ret}")
    elif inv.out("out") != ct:
        errors.append(f"{what}: ciphertext {first_diff(inv.out('out'), ct)}")
    elif inv.out("tag") != tag:
        errors.append(f"{what}: tag {inv.out('tag').hex()} want {tag.hex()}{oracle}")
    return errors + [f"{what}: {d}" for d in inv.damage]


def sealed_mismatch(v, ret: int | None, out: bytes, tag: bytes, returned: str = "returned") -> list[str]:
    """What is wrong with an encryption of known-answer case v (at most one finding)."""
    if ret != 0:
        return [f"COUNT={v.count}: {returned} {ret}"]
    if out != v.ciphertext:
        return [f"COUNT={v.count}: ciphertext {first_diff(out, v.ciphertext)}"]
    if tag != v.tag:
        return [f"COUNT={v.count}: tag {tag.hex()} want {v.tag.hex()}"]
    return []


@dataclass(frozen=True)
class Message:
    """One differential case of an AEAD family: the message and the reference's answer."""

    key: bytes
    iv: bytes  # or nonce
    aad: bytes
    pt: bytes
    ct: bytes
    tag: bytes
    what: str = ""  # the parameters it varies besides the lengths, e.g. "ivlen=12 taglen=16"
    oracle: str = ""  # which reference answered, where the family has several
    problems: tuple[str, ...] = ()  # where the family's references disagree with each other


def diff_aead(kernel: Kernel, fn: str, bits: int, probe: Probe, setup: str,
              message: Callable[[random.Random, int, int], Message], call: Opener, *,
              lengths: Callable[[random.Random], list[int]], quick: bool, seed: int,
              summary: Callable[[int, list[int], set[str]], str]) -> CheckResult:
    """An AEAD encryption or decryption vs the reference: message(rng, j, length) for each text
    length (from lengths(rng)), in separate buffers and in place (quick: in place for every
    other length; j numbers the calls, for the parameters the family cycles); the key from
    `setup`; call(kernel, mem, fn, key region, iv, aad, text, tag or tag length, rng=, in_place=).
    summary(calls, lengths, oracles) is the detail of a pass."""
    name = f"diff {fn} {bits}"
    rng = random.Random(f"{seed}:{name}")
    decrypt = fn.endswith("_decrypt")
    errors: list[str] = []
    oracles: set[str] = set()
    sizes = lengths(rng)
    cases = [(2 * i + in_place, length, in_place) for i, length in enumerate(sizes)
             for in_place in (False, True) if not (quick and in_place and i % 2)]
    for j, length, in_place in cases:
        m = message(rng, j, length)
        mem = HeapMem(rng)
        k = key_or_raise(kernel, mem, setup, m.key)
        oracles.add(m.oracle)
        what = " ".join(filter(None, (f"len={length} aadlen={len(m.aad)}", m.what, "in-place" * in_place)))
        probe.note(name, what)
        errors += [f"{what}: {p}" for p in m.problems]
        inv = call(kernel, mem, fn, k, m.iv, m.aad, m.ct if decrypt else m.pt, m.tag if decrypt else len(m.tag),
                   rng=rng, in_place=in_place)
        errors += aead_errors(inv, decrypt, what, m.pt, m.ct, m.tag, f" ({m.oracle})" if m.oracle else "")
        if len(errors) >= 3:
            return verdict(name, errors, "")
    return verdict(name, errors, summary(len(cases), sizes, oracles - {""}))


def refusal_errors(inv, what: str, length: int, zeroed: bool = True) -> list[str]:
    """What is wrong with a call that must return -1 (zeroed: and leave all `length` bytes of out
    zero) and write nothing else."""
    errors: list[str] = []
    if inv.ret != -1:
        errors.append(f"{what}: returned {inv.ret}, want -1")
    elif zeroed and inv.out("out") != bytes(length):
        nz = sum(1 for b in inv.out("out") if b)
        errors.append(f"{what}: returned -1 but {nz} of {length} out bytes are not zero")
    return errors + [f"{what}: {d}" for d in inv.damage]


# (kernel, rng, mem, key, aad, plaintext, case index) -> (key region, iv/nonce, ciphertext, tag), from the reference
Sealer = Callable[[Kernel, random.Random, HeapMem, bytes, bytes, bytes, int], tuple[Region, bytes, bytes, bytes]]
# the family's decryption call: (kernel, mem, fn, key region, iv/nonce, aad, ciphertext, tag, rng=, in_place=)
Opener = Callable[..., Invocation]


def tamper_lengths(n: int, quick: bool, rng: random.Random) -> list[int]:
    """The text lengths tamper tries by default: the edges of 0..16n+15 and a sample."""
    return sorted({0, 1, 15, 16, 17, 16 * n, 16 * n + 15} | set(rng.sample(range(16 * n + 16), 8 if quick else 24)))


def tamper(kernel: Kernel, fn: str, bits: int, probe: Probe, seal: Sealer, open_: Opener, *, n: int,
           quick: bool, seed: int, lengths: Callable[[random.Random], list[int]] | None = None,
           aad_length: Callable[[int, random.Random], int] | None = None, iv: str = "IV") -> CheckResult:
    """A flipped bit in the tag, ciphertext, AAD or IV/nonce: -1 and all len bytes of out zeroed
    (separate buffers and in place), nothing else written. The family may choose the text
    lengths (default tamper_lengths) and the AAD length of call j (default aad_len); `iv` is
    what it calls the IV."""
    name = f"tamper {fn} {bits}"
    rng = random.Random(f"{seed}:{name}")
    errors: list[str] = []
    calls = 0
    targets = ("tag", "ct", "aad", iv.lower())

    def aad_bytes(j: int) -> int:
        return aad_length(j, rng) if aad_length else aad_len(j, n, rng)

    def attempt(j: int, length: int, t: int, aadlen: int, byte: int | None = None) -> None:
        """Seal case j, flip one bit of field t (a random one, or one in tag byte `byte`), open."""
        nonlocal calls
        key, pt, aad = rng.randbytes(bits // 8), rng.randbytes(length), rng.randbytes(aadlen)
        in_place = bool(j % 2)
        mem = HeapMem(rng)
        k, nonce, ct, tag = seal(kernel, rng, mem, key, aad, pt, j)
        fields = [tag, ct, aad, nonce]
        x = bytearray(fields[t])
        if byte is not None and byte >= len(x):
            return
        bit = rng.randrange(8 * len(x)) if byte is None else 8 * byte + rng.randrange(8)
        x[bit // 8] ^= 1 << (bit % 8)
        tag, ct, aad, nonce = fields[:t] + [bytes(x)] + fields[t + 1:]
        flipped = f"{targets[t]} bit flipped" if byte is None else f"tag byte {byte} flipped"
        what = f"{flipped}, len={length} aadlen={aadlen}{' in-place' if in_place else ''}"
        probe.note(name, what)
        inv = open_(kernel, mem, fn, k, nonce, aad, ct, tag, rng=rng, in_place=in_place)
        calls += 1
        errors.extend(refusal_errors(inv, what, length))

    cases = lengths(rng) if lengths else tamper_lengths(n, quick, rng)
    for i, length in enumerate(cases):
        for t, target in enumerate(targets):
            j = 4 * i + t
            aadlen = max(aad_bytes(j), 1 if target == "aad" else 0)
            if target == "ct" and length == 0:
                continue
            attempt(j, length, t, aadlen)
            if len(errors) >= 3:
                return verdict(name, errors, "")
    # each byte of the tag in turn: a comparison that missed one (a qword, a lane) fails here
    for byte in range(16):
        j = 4 * len(cases) + byte
        attempt(j, 16, 0, aad_bytes(j), byte)
        if len(errors) >= 3:
            return verdict(name, errors, "")
    return verdict(name, errors, f"{calls} calls: tag/ciphertext/AAD/{iv} bit flips and each tag byte's "
                                 "rejected, out zeroed")


# (rng, mem, key region) -> each call that must be refused: (what it passes, its invocation, the text length)
Refusals = Callable[[random.Random, HeapMem, Region], Iterator[tuple[str, Invocation, int]]]


def check_refusals(kernel: Kernel, fn: str, probe: Probe, setup: str, refusals: Refusals, rejected: str, *,
                   zeroed: bool, seed: int) -> CheckResult:
    """Bad arguments: with a key from `setup`, every call refusals() makes to `fn` returns -1
    (zeroed: and leaves all of out zero) and writes nothing else; `rejected` says what they pass."""
    name = f"badargs {fn}"
    rng = random.Random(f"{seed}:{name}")
    mem = HeapMem(rng)
    probe.note(name, "")
    key = key_or_raise(kernel, mem, setup, rng.randbytes(16))
    errors = [e for what, inv, length in refusals(rng, mem, key) for e in refusal_errors(inv, what, length, zeroed)]
    return verdict(name, errors, f"{rejected} rejected" + (", out zeroed" if zeroed else ""))


# (kernel, rng, mem, nblocks, round) -> (the key arguments, (data, acc) -> the reference's acc)
HashKey = Callable[[Kernel, random.Random, HeapMem, int, int], tuple[dict, Callable[[bytes, bytes], bytes]]]


def diff_hash(kernel: Kernel, fn: str, probe: Probe, keyed: HashKey, against: str, *, n: int, quick: bool,
              seed: int) -> CheckResult:
    """An accumulating hash vs the reference: random key and acc, nblocks 0..N, misaligned; then
    the same data split into two calls must give the same acc."""
    name = f"diff {fn}"
    rng = random.Random(f"{seed}:{name}")
    errors: list[str] = []
    calls = 0
    rounds = 2 if quick else 4
    for r in range(rounds):
        for nb in range(n + 1):
            mem = HeapMem(rng)
            acc0, data = rng.randbytes(16), rng.randbytes(16 * nb)
            if r == 0 and nb < 2:
                acc0 = bytes(16)
            keyarg, reference = keyed(kernel, rng, mem, nb, r)
            want = reference(data, acc0)
            what = f"nblocks={nb} acc={acc0.hex()[:8]}.."
            probe.note(name, what)
            inv = invoke(kernel, fn, mem, {**keyarg, "acc": acc0, "data": data, "nblocks": nb})
            calls += 1
            if inv.out("acc") != want:
                errors.append(f"{what}: acc {inv.out('acc').hex()} want {want.hex()}")
            errors += [f"{what}: {d}" for d in inv.damage]
            # continued: the same blocks in two calls
            split = rng.randrange(nb + 1)
            acc = acc0
            for part in (data[:16 * split], data[16 * split:]):
                inv = invoke(kernel, fn, mem, {**keyarg, "acc": acc, "data": part, "nblocks": len(part) // 16})
                acc = inv.out("acc")
                calls += 1
            if acc != want:
                errors.append(f"{what}: split {split}+{nb - split} gives {acc.hex()} want {want.hex()} "
                              "(accumulator not continued)")
            if len(errors) >= 3:
                return verdict(name, errors, "")
    return verdict(name, errors, f"{calls} calls, nblocks 0..{n}, random acc, split into two calls; "
                   f"vs {against}")


def check_key_sizes(kernel: Kernel, fn: str, probe: Probe, *, seed: int) -> CheckResult:
    """Key setup `fn` returns -1 for every size it must refuse and 0 for every size it accepts."""
    name = f"badargs {fn}"
    rng = random.Random(f"{seed}:{name}")
    mem = HeapMem(rng)
    errors: list[str] = []
    probe.note(name, "")
    sig = signatures.SIGNATURES[fn]
    bad = FUNCTIONS[fn].rejected_bits
    for bits in bad:
        ret, _ = make_key(kernel, mem, fn, rng.randbytes(64), bits=bits)
        if ret != -1:
            errors.append(f"bits={bits} returned {ret}, want -1")
    for bits in sig.key_bits:
        ret, _ = make_key(kernel, mem, fn, rng.randbytes(bits // 8))
        if ret != 0:
            errors.append(f"bits={bits} returned {ret}, want 0")
    return verdict(name, errors, f"bits {', '.join(map(str, bad))} rejected, "
                   f"{', '.join(map(str, sig.key_bits))} accepted")


def hash_scene_call(sc: Scene, fn: str, size: int, keyarg: dict) -> tuple:
    """The call under test of a hash scene: random acc and `size` blocks of data."""
    args = {**keyarg, "acc": sc.rng.randbytes(16), "data": sc.rng.randbytes(16 * size), "nblocks": size}
    inv = sc.call(fn, args, test=True)
    return (out_if_placed(inv, "acc"),)
