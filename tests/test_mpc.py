"""Batched kernels for MPC / garbling and multi-stream CBC (kernels/mpc.py, verify/mpc.py).

Expected values come from `cryptography` (AES, per key or per stream) and from sigma written
here from its definition; the DSL descriptions are simulated, the machine code runs through
the whole verifier on each ISA this CPU has (longer sweeps behind the `full` marker).
"""
from __future__ import annotations

import json
import random
import struct

import pytest

from aesgen import declassify
from aesgen.cpu import missing_features
from aesgen.kernels import build_function
from aesgen.pipeline import generate
from aesgen.simulate import Machine, call
from aesgen.spec import KernelSpec
from aesgen.verify import mpc, static_ct

from _support import aesgen_command, cbc_encrypt as cbc, ecb_encrypt as ecb, run, verify_generated

MODES = ("multikey", "fixed-key-hash", "cbc-multi")
# (isa, width, depth) the issue asks for, and a few more
CONFIGS = [("avx", 128, 8), ("avx2", 256, 8), ("avx512", 512, 8)]
MORE = [("sse", 128, 4), ("avx512", 512, 4), ("avx512", 256, 8), ("avx512", 128, 16), ("avx2", 256, 3)]


# ---------------------------------------------------------------- sigma, from its definition

def test_sigma_is_xl_xor_xr_then_xl_by_bytes():
    x = bytes(range(16))  # xL = 00..07, xR = 08..0f
    assert mpc.sigma_reference(x) == bytes.fromhex("0808080808080808" "0001020304050607")
    rng = random.Random(7)
    for _ in range(50):
        x = rng.randbytes(16)
        s = mpc.sigma_reference(x)
        assert s[:8] == bytes(x[i] ^ x[i + 8] for i in range(8)) and s[8:] == x[:8]
        assert mpc.sigma_inverse(s) == x


def test_sigma_is_an_orthomorphism():
    """sigma and x -> sigma(x) ^ x are both permutations (what the half-gates proof needs),
    seen on 8-bit halves' worth of inputs: distinct inputs give distinct outputs."""
    xs = [bytes([a] * 8 + [b] * 8) for a in range(0, 256, 17) for b in range(0, 256, 15)]
    images = {mpc.sigma_reference(x) for x in xs}
    diffs = {bytes(p ^ q for p, q in zip(mpc.sigma_reference(x), x)) for x in xs}
    assert len(images) == len(diffs) == len(xs)


def test_pasted_sp800_38a_figures_match_cryptography():
    """Guards the pasted SP 800-38A F.1/F.2 figures against a typo before they judge kernels."""
    from aesgen.verify import vectors
    for bits in (128, 192, 256):
        key = vectors.SP800_38A_KEYS[bits]
        assert ecb(key, vectors.SP800_38A_PLAINTEXT) == vectors.SP800_38A_CIPHERTEXT["ECB", bits]
        assert cbc(key, vectors.SP800_38A_IV, vectors.SP800_38A_PLAINTEXT) == vectors.SP800_38A_CIPHERTEXT["CBC", bits]


# ---------------------------------------------------------------- the DSL, simulated

def _spec(isa: str, width: int, depth: int) -> KernelSpec:
    return KernelSpec(MODES, isa, width, depth)


@pytest.mark.parametrize("isa,width,depth", [("avx", 128, 3), ("avx2", 256, 2), ("avx512", 512, 2)])
def test_simulated_multikey_matches_ecb_per_key(isa, width, depth):
    spec = _spec(isa, width, depth)
    rng = random.Random(f"mk{isa}")
    setk, enc = build_function(spec, "set_encrypt_keys"), build_function(spec, "ecb_encrypt_multikey")
    lanes = spec.multikey_lanes
    for bits, nkeys, bpk in ((128, 1, 1), (192, 2 * lanes * depth + 1, 2), (256, lanes + 1, lanes + 1)):
        m = Machine(spec, size=1 << 20)
        keys = [rng.randbytes(bits // 8) for _ in range(nkeys)]
        data = rng.randbytes(16 * nkeys * bpk)
        ks = m.alloc(spec.multikey_schedule_bytes(nkeys))
        assert call(m, setk, m.alloc(b"".join(keys)), bits, nkeys, ks) == 0
        out = m.alloc(len(data))
        call(m, enc, ks, nkeys, m.alloc(data), out, bpk)
        want = b"".join(ecb(k, data[16 * bpk * j:16 * bpk * (j + 1)]) for j, k in enumerate(keys))
        assert m.read(out, len(data)) == want, (bits, nkeys, bpk)


@pytest.mark.parametrize("isa,width,depth", [("avx", 128, 3), ("avx2", 256, 2), ("avx512", 512, 2)])
def test_simulated_hash_and_multi_cbc_match_the_references(isa, width, depth):
    spec = _spec(isa, width, depth)
    rng = random.Random(f"cbc{isa}")
    m = Machine(spec, size=1 << 20)
    setk = build_function(spec, "set_encrypt_key")
    key = rng.randbytes(16)
    ks = m.alloc(spec.key_bytes)
    call(m, setk, m.alloc(key), 128, ks)
    data = rng.randbytes(16 * (spec.lanes * depth + 1))
    out = m.alloc(len(data))
    call(m, build_function(spec, "fixed_key_hash"), ks, m.alloc(data), out, len(data) // 16)
    assert m.read(out, len(data)) == mpc.hash_reference(key, data)

    nstreams, nblocks = 2 * spec.lanes + 1, 5
    keys = [rng.randbytes(32) for _ in range(nstreams)]
    scheds = []
    for k in keys:
        scheds.append(m.alloc(spec.key_bytes))
        call(m, setk, m.alloc(k), 256, scheds[-1])
    ivs = [rng.randbytes(16) for _ in range(nstreams)]
    texts = [rng.randbytes(16 * nblocks) for _ in range(nstreams)]
    ins = [m.alloc(t) for t in texts]
    outs = [m.alloc(16 * nblocks) for _ in texts]
    iv_at = [m.alloc(iv) for iv in ivs]

    def table(addrs):
        return m.alloc(struct.pack(f"<{nstreams}Q", *addrs))
    call(m, build_function(spec, "cbc_encrypt_multi"), table(scheds), table(ins), table(outs), nblocks,
         table(iv_at), nstreams)
    for s in range(nstreams):
        want = cbc(keys[s], ivs[s], texts[s])
        assert m.read(outs[s], len(want)) == want, s
        assert m.read(iv_at[s], 16) == want[-16:], s


# ---------------------------------------------------------------- the file

def test_header_documents_layout_and_sigma():
    spec = _spec("avx512", 512, 8)
    h = generate(spec).header
    p = spec.prefix
    assert f"#define {p}_MULTIKEY_BYTES 256" in h and f"#define {p}_MULTIKEY_LANES 4" in h
    assert "xL = bytes 0..7 and xR = bytes 8..15" in h
    assert "sigma(x)[i] = x[i] ^ x[i + 8] and sigma(x)[i + 8] = x[i]" in h
    assert f"void {p}_cbc_encrypt_multi(const void *const *keys, const uint8_t *const *in, " \
           "uint8_t *const *out, size_t nblocks, uint8_t *const *ivs, unsigned nstreams);" in h
    assert f"int {p}_set_encrypt_keys(const uint8_t *user_keys, unsigned bits, unsigned nkeys, void *keys);" in h
    assert spec.multikey_schedule_bytes(5) == 2 * 4 * 256 and spec.multikey_rounds_offset == 960


def test_multikey_layout_is_the_documented_one():
    """Round key r of key k at (k / L) * 256L + 16L * r + 16 * (k % L)."""
    key = bytes(range(16))
    lay = mpc.multikey_layout(2, [bytes(16), bytes(16), key])
    assert lay[2 * 256 + 0] == key  # key 2: group 1, lane 0, round 0 is the key itself
    assert lay[2 * 256 + 32 * 10] == bytes.fromhex("13111d7fe3944a17f307a78b4d2b30c5")  # FIPS-197 C.1 round[10].k_sch
    assert lay[2 * 256 + 32 * 15] == struct.pack("<I", 10)


def test_pointer_loads_are_the_only_declassifications(tmp_path):
    """Without the markers on the stream-pointer loads, the static check sees the pointers
    as data and fails cbc_encrypt_multi (secret address); with them every function passes."""
    spec = _spec("avx2", 256, 4)
    asm = generate(spec).asm
    path = tmp_path / "k.S"
    path.write_text(asm)
    assert all(r.status == "pass" for r in static_ct.check(spec, path))
    bad = tmp_path / "bad.S"
    bad.write_text("\n".join(x for x in asm.splitlines() if declassify.MARK not in x) + "\n")
    results = {r.name: r for r in static_ct.check(spec, bad)}
    assert results["ct cbc_encrypt_multi"].status == "fail"
    assert "secret-address" in results["ct cbc_encrypt_multi"].detail
    assert results["ct ecb_encrypt_multikey"].status == "pass"


def test_output_is_deterministic():
    spec = _spec("avx512", 256, 4)
    assert generate(spec).asm == generate(spec).asm


def test_a_depth_the_registers_cannot_hold_is_refused(tmp_path):
    res = run(aesgen_command() + ["generate", "cbc-multi", "--isa", "sse", "--depth", "16",
                                  "-o", str(tmp_path / "x.S")])
    assert res.returncode == 2
    assert "vector registers" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.S").exists()


# ---------------------------------------------------------------- the whole verifier

@pytest.mark.parametrize("isa,width,depth", CONFIGS)
def test_verifier_passes(tmp_path, isa, width, depth):
    names = {r.name for r in verify_generated(tmp_path, _spec(isa, width, depth), quick=True)}
    for fn in ("ecb_encrypt_multikey", "fixed_key_hash", "cbc_encrypt_multi"):
        for check in ("kat", "diff", "simulate", "abi", "ct", "guard"):
            assert any(n.startswith(f"{check} {fn}") for n in names), (check, fn)


@pytest.mark.full
@pytest.mark.parametrize("isa,width,depth", CONFIGS + MORE)
def test_verifier_passes_full(tmp_path, isa, width, depth):
    verify_generated(tmp_path, _spec(isa, width, depth))


# ---------------------------------------------------------------- aesgen bench (nothing about speed)

BENCHED = KernelSpec(MODES, "avx2", 256, 2)


@pytest.mark.skipif(bool(missing_features(BENCHED.features)),
                    reason=f"CPU lacks {' '.join(missing_features(BENCHED.features))}")
def test_bench_times_the_batched_ops_and_names_the_peers(tmp_path):
    js = tmp_path / "bench.json"
    res = run(aesgen_command() + ["bench", ",".join(MODES), "--isa", "avx2", "--width", "256", "--depth", "2",
                                  "--sizes", "256", "--trials", "3", "--budget", "0", "--no-verify", "--compare", "ipsec-mb",
                                  "--json", str(js)])
    assert res.returncode == 0, res.stderr
    d = json.loads(js.read_text())
    ours = {m["op"] for m in d["measurements"] if m["impl"] == "aesgen"}
    assert ours == {"ecb_encrypt_multikey", "fixed_key_hash", "cbc_encrypt_multi"}
    peer = d["op_peers"]
    assert peer["fixed_key_hash"]["ipsec-mb"].startswith("n/a (no multi-key ECB / fixed-key hash")
    multi = peer["cbc_encrypt_multi"]["ipsec-mb"]
    assert "multi-buffer CBC" in multi or multi.startswith("n/a (built without")


def test_the_verifier_catches_lanes_out_of_place(tmp_path, monkeypatch):
    """A transposition that puts the streams' blocks in the wrong lanes (here: the last two
    blocks of each stream swapped) must fail the known answers and the differential test."""
    from aesgen.kernels import mpc as kernels_mpc
    from aesgen.verify import verify_kernel

    spec = KernelSpec(("cbc-multi",), "avx512", 512, 4)
    if missing_features(spec.features):
        pytest.skip(f"CPU lacks {' '.join(missing_features(spec.features))}")
    right = kernels_mpc.transpose

    def swapped(b, rows, width=None):
        out = right(b, rows, width)
        return out[:-2] + [out[-1], out[-2]]
    monkeypatch.setattr(kernels_mpc, "transpose", swapped)
    path = tmp_path / "bad.S"
    path.write_text(generate(spec, path.name).asm)
    failed = {r.name.split(" ")[0] for r in verify_kernel(path, spec, quick=True)
              if r.status == "fail" and "cbc_encrypt_multi" in r.name}
    assert {"kat", "diff"} <= failed


def test_verifier_passes_on_a_win64_file(tmp_path):
    """Under --abi win64 the wrapper reloads arguments 5 and 6 from the stack and pops rdi/rsi:
    the kernels must not let rsp escape (the static check would distrust those reloads)."""
    verify_generated(tmp_path, KernelSpec(MODES, "avx2", 256, 4, abi="win64"), quick=True)
