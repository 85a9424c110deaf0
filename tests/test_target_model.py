"""Targets (data files, native detection) and the model's choices."""
from __future__ import annotations

import pytest

from aesgen import model
from aesgen.spec import FEATURES_BY_ISA, WIDTHS_BY_ISA
from aesgen.target import TargetError, cpu_signature, load, native, nearest, targets

ALL = ("westmere", "sandybridge", "haswell", "skylake", "icelake", "tigerlake", "sapphirerapids",
       "zen2", "zen3", "zen4", "zen5")


def test_every_named_target_has_a_data_file():
    assert set(ALL) <= set(targets())


@pytest.mark.parametrize("name", ALL)
def test_target_data_is_complete(name):
    t = load(name)
    assert t.vector_registers == (32 if "avx512f" in t.features else 16)
    assert t.preferred_widths and all(w in (128, 256, 512) for w in t.preferred_widths)
    lat, tput = t.cost("aesenc", 128)
    assert lat > tput > 0
    for w in WIDTHS_BY_ISA[t.isa]:
        t.cost("aesenc", w)  # every width the ISA offers has a cost


@pytest.mark.parametrize("name,isa", [("westmere", "sse"), ("sandybridge", "avx"), ("skylake", "avx"),
                                      ("zen3", "avx2"), ("icelake", "avx512"), ("zen5", "avx512")])
def test_isa_follows_features(name, isa):
    assert load(name).isa == isa


def test_icelake_and_tigerlake_prefer_ymm():
    # Linux and BoringSSL keep 256-bit code on these (zmm lowers the clock).
    for name in ("icelake", "tigerlake"):
        assert load(name).widths()[0] == 256
    assert load("sapphirerapids").widths()[0] == 512


@pytest.mark.parametrize("name,width,depth", [("skylake", 128, 4), ("zen5", 512, 8), ("zen3", 256, 8),
                                              ("zen4", 512, 4), ("icelake", 256, 6), ("westmere", 128, 3)])
def test_model_depth_is_latency_over_throughput(name, width, depth):
    c = model.choose(load(name), "ecb")
    assert (c.width, c.depth) == (width, depth)


def test_a_measured_depth_in_the_target_file_overrides_the_pipe_rule():
    """Sapphire Rapids records GCM at depth 8 on zmm (GHASH shares the AES ports); other modes
    and widths keep latency / throughput, and the reason names the measurement."""
    spr = load("sapphirerapids")
    depth, source = spr.measured_depth("gcm", 512)
    gcm = model.choose(spr, "gcm")
    assert (gcm.width, gcm.depth) == (512, depth) and source in gcm.reason
    assert model.choose(spr, "ecb").depth == model.pipe_depth(spr, 512)
    assert spr.measured_depth("gcm", 256) is None and load("zen4").measured_depth("gcm", 512) is None


@pytest.mark.parametrize("name", sorted(targets()))
def test_measured_depths_name_their_source_and_build(name):
    t = load(name)
    for (mode, isa, width), entry in t.depth_records().items():
        assert set(entry) == {"depth", "source"} and "measured" in entry["source"], (name, mode, isa, width)
        assert model.builds(isa or t.isa_for_width(width), width, mode, int(entry["depth"])), (name, mode, width)
    if shared := t.depths.get("depths_from"):
        assert shared in targets() and shared != name


def test_a_16_register_record_applies_to_its_isa_and_a_shared_core_borrows_it():
    """Golden Cove at 16 registers: CTR32 at depth 2 and XTS at 8 for avx2 ymm, OTR at 8 for avx
    xmm (measured); the same core with 32 registers keeps the pipe rule, and Alder Lake's
    P-cores take Sapphire Rapids' records (depths_from)."""
    spr, adl = load("sapphirerapids"), load("alderlake")
    assert model.choose(spr, "ctr32", "avx2", 256).depth == 2
    assert model.choose(spr, "xts", "avx2", 256).depth == 8
    assert model.choose(spr, "otr", "avx", 128).depth == 8
    assert spr.measured_depth("ctr32", 256) is None  # avx512 at 256 bits: not the record's register file
    assert model.choose(spr, "ctr32", "avx512", 256).depth == model.pipe_depth(spr, 256)
    for mode, isa, width in (("ctr32", None, 256), ("xts", None, 256), ("otr", "avx", 128)):
        assert adl.measured_depth(mode, width, isa) == spr.measured_depth(mode, width, isa or "avx2")
    assert adl.measured_depth("gcm", 512) is None  # a width Alder Lake does not have borrows nothing it uses


def test_model_lowers_depth_to_what_the_registers_hold():
    # Sandy Bridge wants 8 (latency 8, throughput 1); CTR32 at depth 8 fits 16 registers,
    # at 16 it would not: max_depth bounds the choice.
    assert model.max_depth("avx", 128, "ctr32") < 16
    c = model.choose(load("sandybridge"), "ctr32")
    assert c.depth <= model.max_depth("avx", 128, "ctr32")


@pytest.mark.parametrize("name", sorted(targets()))
def test_every_target_choice_builds(name):
    """A depth the mode does not take is moved to one it does: OCB's batch is a power of two
    blocks, and Sapphire Rapids' zmm pipe wants 3 x 4 = 12 in flight (once --target native failed)."""
    t = load(name)
    for mode in ("ecb", "ctr32", "cbc", "xts", "ocb", "otr", "gcm"):
        c = model.choose(t, mode)
        assert model.builds(c.isa, c.width, mode, c.depth), (name, c)


def test_ocb_rounds_an_odd_depth_up_to_a_power_of_two_batch():
    c = model.choose(load("sapphirerapids"), "ocb")
    assert (c.width, c.depth) == (512, 4) and "ocb takes depth 4, not 3" in c.reason


def test_spec_for_sets_the_widest_width_and_per_mode_overrides():
    t = load("zen5")
    choices = {"ecb": model.ModeChoice("ecb", "avx512", 512, 8, ""),
               "cbc": model.ModeChoice("cbc", "avx512", 256, 4, "")}
    spec = model.spec_for(t, ("ecb", "cbc"), None, choices)
    assert (spec.width, spec.depth) == (512, 8)
    assert spec.width_for("cbc") == 256 and spec.depth_for("cbc") == 4
    assert spec.prefix == "aesgen_zen5_ecb_cbc"  # the mode set is part of every default prefix


CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
cpu family\t: {family}
model\t\t: {model}
model name\t: Test CPU
flags\t\t: {flags}

processor\t: 1
"""


@pytest.mark.parametrize("vendor,family,model_,expect", [
    ("GenuineIntel", 6, 0x55, "skylake"), ("GenuineIntel", 6, 0x8c, "tigerlake"),
    ("GenuineIntel", 6, 0x8f, "sapphirerapids"), ("AuthenticAMD", 0x17, 0x31, "zen2"),
    ("AuthenticAMD", 0x19, 0x21, "zen3"), ("AuthenticAMD", 0x19, 0x11, "zen4"),
    ("AuthenticAMD", 0x1A, 0x02, "zen5")])
def test_native_maps_signatures_to_targets(vendor, family, model_, expect):
    info = CPUINFO.format(vendor=vendor, family=family, model=model_, flags="aes ssse3 avx")
    t = native(info, frozenset({"aes", "ssse3", "avx"}))
    assert t.modelled_as == expect
    # The real feature set wins over the target's: only what this CPU has.
    assert t.features == ("aes", "avx", "ssse3")
    assert t.isa == "avx"


def test_unknown_cpu_maps_to_the_target_sharing_most_features():
    flags = frozenset(FEATURES_BY_ISA["avx2"]) | {"pclmulqdq", "vpclmulqdq", "bmi2"}
    t = nearest("SomeVendor", 99, 1, flags)
    assert all(f in flags for f in t.features)
    assert t.isa == "avx2"


def test_cpu_signature_reads_the_first_cpu():
    info = CPUINFO.format(vendor="AuthenticAMD", family=25, model=17, flags="aes")
    assert cpu_signature(info) == ("AuthenticAMD", 25, 17, "Test CPU")


def test_unknown_target_is_refused():
    with pytest.raises(TargetError, match="unknown target 'pentium'"):
        load("pentium")


def test_max_depths_on_every_core_match_one_at_a_time() -> None:
    """`aesgen list` works the table out in a process pool: the same figures as max_depth."""
    configs = [("avx", 128, "rijndael256"), ("sse", 128, "otr"), ("avx512", 512, "ecb")]
    assert model.max_depths(configs) == {c: model.max_depth(*c) for c in configs}


def test_an_internal_build_error_is_raised_not_taken_for_a_register_file_refusal(monkeypatch) -> None:
    """A generator bug at some depth must not make the depth search settle on a shallower
    kernel: only refusals (the register file, the mode's own rules) read as "does not build"."""
    from aesgen.dsl import BuildError

    def broken(spec):
        raise BuildError("internal: %t1 crosses a label or is read before written")

    def too_big(spec):
        raise BuildError(f"depth {spec.depth} does not fit the register file")

    model.builds.cache_clear()
    try:
        monkeypatch.setattr(model, "check_fits", too_big)
        assert model.builds("avx", 128, "ctr32", 4) is False
        monkeypatch.setattr(model, "check_fits", broken)
        with pytest.raises(BuildError, match="internal"):
            model.builds("avx", 128, "ctr32", 5)
    finally:
        model.builds.cache_clear()
