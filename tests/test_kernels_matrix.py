"""Every kernel, natively: ISA x width x depth x key size x mode, through the verifier.

The default run verifies {sse/128, avx/128, avx2/256, avx512/128, avx512/256,
avx512/512} x depths {1, 4, 8} (and 16 on avx512's 32 registers) with
quick=True; `-m full` runs every depth 1..16 that fits the register file with
quick=False. Key sizes (128/192/256) are covered inside the verifier, one
check per size.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from _support import ISA_WIDTHS, KEY_BITS, MODE_FUNCS, NREGS
from aesgen.cpu import missing_features
from aesgen.dsl import BuildError
from aesgen.pipeline import generate
from aesgen.spec import KernelSpec
from aesgen.verify import verify_kernel

MODES = ("ecb", "ctr32", "cbc")
DEFAULT = [(isa, w, d) for isa, w in ISA_WIDTHS for d in (1, 4, 8)] + \
          [("avx512", w, 16) for w in (128, 256, 512)]


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory):
    """Each config generated once per module (and per xdist worker)."""
    cache: dict[tuple, Path] = {}
    folder = tmp_path_factory.mktemp("matrix")

    def get(modes: tuple[str, ...], isa: str, width: int, depth: int) -> tuple[KernelSpec, Path]:
        spec = KernelSpec(modes, isa, width, depth)
        if spec not in cache:
            g = generate(spec, f"{spec.prefix}.S")
            path = folder / f"{'_'.join(modes)}_{spec.prefix}.S"
            path.write_text(g.asm)
            path.with_suffix(".h").write_text(g.header)
            cache[spec] = path
        return spec, cache[spec]

    return get


def check_results(spec: KernelSpec, results) -> None:
    fails = {r.name: r.detail for r in results if r.status == "fail"}
    assert not fails, f"{spec.prefix}: {len(fails)} failed: " + "; ".join(f"{k}: {v[:200]}" for k, v in fails.items())
    skips = {r.name: r.detail for r in results if r.status == "skip"}
    assert not skips, f"skipped on a CPU that has every feature: {skips}"
    names = [r.name for r in results]
    assert len(names) == len(set(names))
    for group in ("build", "symbols", "cpu_supported", "roundtrip", "abi selftest clean"):
        assert group in names, f"check {group!r} did not run"
    for mode in spec.modes:
        for fn in MODE_FUNCS[mode]:
            for bits in KEY_BITS:
                assert f"diff {fn} {bits}" in names, f"no differential check of {fn} AES-{bits}"
                assert any(re.fullmatch(rf"kat {fn} \S*{bits}", n) for n in names), f"no KAT of {fn} AES-{bits}"
            assert f"guard {fn} after" in names and f"guard {fn} before" in names


def skip_if_cpu_lacks(spec: KernelSpec) -> None:
    missing = missing_features(spec.features)
    if missing:
        pytest.skip(f"this CPU lacks {' '.join(missing)}")


@pytest.mark.parametrize("isa,width,depth", DEFAULT, ids=[f"{i}-{w}x{d}" for i, w, d in DEFAULT])
def test_kernel_matrix(isa: str, width: int, depth: int, kernels) -> None:
    spec, path = kernels(MODES, isa, width, depth)
    skip_if_cpu_lacks(spec)
    check_results(spec, verify_kernel(path, quick=True))


@pytest.mark.parametrize("overrides", [(("cbc", 256, 2),), (("ecb", 128, 3), ("ctr32", 256, 5))])
def test_per_mode_overrides(overrides: tuple, tmp_path: Path) -> None:
    """A tuned file: modes at their own width and depth, one key schedule at the widest stride."""
    spec = KernelSpec(MODES, "avx512", 512, 4, overrides=overrides)
    path = tmp_path / "tuned.S"
    path.write_text(generate(spec, path.name).asm)
    skip_if_cpu_lacks(spec)
    check_results(spec, verify_kernel(path, quick=True))


@pytest.mark.parametrize("mode,isa,width,depth", [
    ("ctr32", "avx", 128, 16), ("ctr32", "sse", 128, 15), ("ctr32", "avx2", 256, 16),
    ("cbc", "sse", 128, 16), ("cbc", "avx2", 256, 13),
])
def test_infeasible_configs_name_the_register_count(mode: str, isa: str, width: int, depth: int) -> None:
    with pytest.raises(BuildError, match=rf"needs more than the {NREGS[isa]} vector registers") as e:
        generate(KernelSpec((mode,), isa, width, depth))
    assert "--depth" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.full
@pytest.mark.parametrize("depth", range(1, 17))
@pytest.mark.parametrize("isa,width", ISA_WIDTHS)
def test_kernel_matrix_full(isa: str, width: int, depth: int, kernels) -> None:
    feasible = []
    for mode in MODES:
        try:
            generate(KernelSpec((mode,), isa, width, depth))
            feasible.append(mode)
        except BuildError as e:
            assert f"{NREGS[isa]} vector registers" in str(e), str(e)
    if isa == "avx512" or depth <= 8:
        assert feasible == list(MODES), f"{isa}/{width} depth {depth}: only {feasible} fit"
    if not feasible:
        pytest.skip("no mode fits the register file at this depth")
    spec, path = kernels(tuple(feasible), isa, width, depth)
    skip_if_cpu_lacks(spec)
    check_results(spec, verify_kernel(path, quick=False))
