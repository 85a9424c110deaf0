"""AES-OTR kernels: the lane shuffles they rely on, the refusal of depths that cannot fit, the
constant-time scan with its one declassification, and the whole verifier on generated files
(the designer's vectors, the differential against verify/reference/otr.py, tamper, bad arguments, ABI,
guard pages, simulation)."""
from __future__ import annotations

import pytest

from aesgen.consts import zip_index
from aesgen.ir import Insn, VReg
from aesgen.lower import Lowerer
from aesgen.mainloop import main_loop
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec

from _support import aesgen_command, assert_verdict_is_the_only_declassification, run, verify_generated

# The instructions' definitions (Intel SDM), on tuples of 128-bit lanes, written here
# independently of generator/lower.py.


def vshufi32x4(src1: tuple, src2: tuple, imm: int) -> tuple:
    if len(src1) == 2:  # ymm: one selector bit per destination lane
        return src1[imm & 1], src2[imm >> 1 & 1]
    return tuple((src1 if k < 2 else src2)[imm >> 2 * k & 3] for k in range(4))


def vperm2i128(src1: tuple, src2: tuple, imm: int) -> tuple:
    both = src1 + src2
    return both[imm & 3], both[imm >> 4 & 3]


def valignq(src1: tuple, src2: tuple, imm: int) -> tuple:
    """(src1:src2) shifted right by imm qwords; imm even here (whole lanes)."""
    return (src2 + src1)[imm // 2: imm // 2 + len(src1)]


def vpermi2q(index: tuple, table1: tuple, table2: tuple, _imm) -> tuple:
    """Qword k of the result: qword index[k] mod 16 of table1's then table2's qwords."""
    qwords = [(lane, q) for lane in table1 + table2 for q in (0, 1)]
    picked = [qwords[i % 16] for i in index]
    assert all(picked[2 * k][1] == 0 and picked[2 * k + 1] == (picked[2 * k][0], 1) for k in range(len(picked) // 2))
    return tuple(picked[2 * k][0] for k in range(len(picked) // 2))


MACHINE = {"vshufi32x4": vshufi32x4, "vperm2i128": vperm2i128, "valignq": valignq, "vpermi2q": vpermi2q,
           "vload": lambda c, _imm: tuple(int.from_bytes(c.data[8 * k:8 * k + 8], "little")
                                          for k in range(len(c.data) // 8))}


def expected(op: str, a: tuple, b: tuple, imm: int) -> tuple:
    """What the DSL ops mean (generator/simulate.py documents the same)."""
    if op == "next_lanes":
        return a[1:] + b[:1]
    if op == "deal_lanes":
        return (a + b)[imm::2]
    half = len(a) // 2
    return tuple(x for k in range(half * imm, half * imm + half) for x in (a[k], b[k]))


def run_lowered(insns: list[Insn], values: dict[int, tuple]) -> tuple:
    for i in insns:
        srcs = [values[s.id] if isinstance(s, VReg) else s for s in i.srcs]
        values[i.dst.id] = MACHINE[i.op](*srcs, i.imm)
    return values[insns[-1].dst.id]


@pytest.mark.parametrize("isa,width", [("avx2", 256), ("avx512", 256), ("avx512", 512)])
@pytest.mark.parametrize("op,imm", [("next_lanes", None), ("deal_lanes", 0), ("deal_lanes", 1),
                                    ("zip_lanes", 0), ("zip_lanes", 1)])
def test_lane_shuffles_lower_to_what_they_mean(isa, width, op, imm):
    lanes = width // 128
    a, b, out = VReg(1, "a"), VReg(2, "b"), VReg(3, "out")
    index = (zip_index(imm, lanes),) if op == "zip_lanes" and lanes == 4 else ()
    insns = Lowerer(KernelSpec(("otr",), isa, width, 2), width).insn(
        Insn(op, out, (a, b, *index), imm=imm, width=width))
    av, bv = tuple(f"a{k}" for k in range(lanes)), tuple(f"b{k}" for k in range(lanes))
    assert run_lowered(insns, {1: av, 2: bv}) == expected(op, av, bv, imm)


def test_a_depth_that_cannot_fit_is_refused_in_one_line(tmp_path):
    # (legacy SSE: no GPR offset tables, so its groups keep their offsets in registers)
    res = run(aesgen_command() + ["generate", "otr", "--isa", "sse", "--width", "128", "--depth", "8",
                                  "-o", str(tmp_path / "k.S")])
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "vector registers" in res.stderr
    assert not (tmp_path / "k.S").exists()


def test_header_states_the_key_size():
    spec = KernelSpec(("otr",), "avx2", 256, 2)
    header = generate(spec).header
    assert f"#define {spec.prefix}_OTR_KEY_BYTES {spec.otr_key_bytes} " in header
    assert spec.otr_key_bytes >= spec.otr_q_offset + 16 and spec.otr_key_bytes % 64 == 0
    assert f"int {spec.prefix}_otr_decrypt(const void *tkey, const uint8_t *nonce, size_t noncelen" in header


def test_constant_time_scan_passes_only_thanks_to_the_declassified_verdict(tmp_path):
    assert_verdict_is_the_only_declassification(tmp_path, KernelSpec(("otr",), "avx", 128, 2), "otr_decrypt")


CONFIGS = [("avx", 128, 2), ("avx", 128, 4), ("avx2", 256, 2), ("avx2", 256, 4), ("avx512", 512, 3),
           ("avx512", 512, 4), ("avx512", 512, 8)]


@pytest.mark.parametrize("isa,width,depth", CONFIGS)
def test_generated_file_verifies(tmp_path, isa, width, depth):
    results = verify_generated(tmp_path, KernelSpec(("otr",), isa, width, depth), quick=True)
    names = {r.name for r in results}
    for fn in ("otr_encrypt", "otr_decrypt"):
        assert {f"ct {fn}", f"diff {fn} 192", f"kat {fn} P-AES256", f"simulate {fn}", f"abi {fn}",
                f"guard {fn} after", f"guard {fn} len0", f"badargs {fn}"} <= names
    assert {"tamper otr_decrypt 128", "badargs otr_set_key"} <= names


@pytest.mark.full
@pytest.mark.parametrize("isa,width,depth", CONFIGS + [("sse", 128, 3), ("avx512", 128, 4), ("avx512", 256, 8)])
def test_generated_file_verifies_full(tmp_path, isa, width, depth):
    verify_generated(tmp_path, KernelSpec(("otr",), isa, width, depth))


@pytest.mark.parametrize("width,depth", [(512, 1), (512, 3), (512, 4), (256, 2)])
def test_avx512_main_loop_pipelines_two_batches_without_vector_doublings(width, depth):
    """The batch loop (unrolled twice: one body per offset table) holds the second rounds of
    one batch and the first rounds of the next (2 x depth vectors through 10 AES-128 rounds),
    takes its offsets from the tables the general-purpose registers fill (movbe: no
    vpclmulqdq, no byte shuffle of offsets), and moves by one batch of 32-byte chunks."""
    asm = generate(KernelSpec(("otr",), "avx512", width, depth)).asm
    for function in ("otr_encrypt", "otr_decrypt"):
        loop = main_loop(asm, function)
        assert f"_{function}_batch" in loop.label
        assert dict(loop.unit_counts()) == {("vaesenc", width): 2 * 2 * 10 * depth}
        assert not any(i.startswith("vpshufb") for i in loop.instructions)
        chunks = depth * width // 128
        assert sum(i.startswith("movbe") for i in loop.instructions) == 2 * 2 * (chunks + 1)
        assert loop.text().count(f"add ${32 * chunks:#x},%r9") == 2


@pytest.mark.parametrize("depth", [3, 4])
def test_offset_table_stores_ride_between_the_aes_rounds(depth):
    """The table's stores are spread over the rounds (in one run they fill the store queue):
    no more than an eighth of them between two vaesenc (not a fill's 2 (4 depth + 1) in a row)."""
    loop = main_loop(generate(KernelSpec(("otr",), "avx512", 512, depth)).asm, "otr_encrypt")
    runs, run = [], 0
    for i in loop.instructions:
        if i.startswith("vaesenc"):
            runs.append(run)
            run = 0
        run += i.startswith("movbe")
    stores = 2 * 2 * (4 * depth + 1)
    assert sum(runs) + run == stores
    assert max(runs + [run]) <= stores // 8


@pytest.mark.parametrize("depth", [4, 8])
def test_avx2_full_batches_pair_chunk_i_with_i_plus_depth(depth):
    """On 16 registers the whole batches at depths 4 and 8 (offsets moving on by whole bytes)
    hold chunks i and i + D in a vector's lanes: no lane shuffle; each of the D + 1 offset
    vectors moves a batch on with one carry-less multiply; the blocks come in by lane inserts
    (two per group) and leave by lane stores; the loop (two batches, the slot sets
    alternating) carries the next batch's stage between its AES rounds, not before them."""
    for function in ("otr_encrypt", "otr_decrypt"):
        loop = main_loop(generate(KernelSpec(("otr",), "avx2", 256, depth)).asm, function)
        assert "_full_pair" in loop.label
        ins = loop.instructions
        assert dict(loop.unit_counts()) == {("vaesenc", 256): 2 * 2 * 10 * depth, ("vpclmulqdq", 256): 2 * (depth + 1)}
        assert not any(i.startswith("vperm2i128") for i in ins)
        assert sum(i.startswith("vinserti128") for i in ins) == 2 * 2 * depth
        assert loop.text().count(f"add ${2 * depth * 32:#x},%r9") == 2
        first_aes = next(k for k, i in enumerate(ins) if i.startswith("vaesenc"))
        last_aes = max(k for k, i in enumerate(ins) if i.startswith("vaes"))
        riding = [i for i in ins[first_aes:last_aes] if i.startswith("vinserti128")]
        assert len(riding) >= 2 * depth, "the next batch's blocks come in between the rounds"


def test_other_avx2_depths_keep_consecutive_chunks():
    loop = main_loop(generate(KernelSpec(("otr",), "avx2", 256, 6)).asm, "otr_encrypt")
    assert "_otr_encrypt_loop6x_" in loop.label


def test_deeper_avx512_batches_keep_the_unpipelined_loop():
    loop = main_loop(generate(KernelSpec(("otr",), "avx512", 512, 8)).asm, "otr_encrypt")
    assert "_otr_encrypt_loop8x_" in loop.label


def test_gfni_backend_keeps_the_unpipelined_loop_and_needs_no_movbe():
    spec = KernelSpec(("otr",), "avx512", 512, 4, backend="gfni")
    assert "movbe" not in spec.features
    assert "_otr_encrypt_loop4x_" in main_loop(generate(spec).asm, "otr_encrypt").label
    assert "movbe" in KernelSpec(("otr",), "avx512", 512, 4).features
