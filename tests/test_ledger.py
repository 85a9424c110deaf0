"""The per-microarchitecture ledger (aesgen.tools.ledger, `aesgen bench --all --record`)."""
from __future__ import annotations

from click.testing import CliRunner

from aesgen.bench.timing import BenchResult, Measurement, OpCeiling
from aesgen.spec import KernelSpec
from aesgen.tools import ledger
from aesgen.tools.cli import main

MACHINE = ledger.Machine("GenuineIntel", 6, 0xA7, "Test CPU", "sapphirerapids", ("aes", "avx2", "vaes", "avx512f"))


def measured(op: str, size: int, impl: str, gbps: float, rounds: int = 8) -> Measurement:
    ticks = size / gbps  # at a 1 GHz TSC
    return Measurement(op, size, impl, ticks, ticks, gbps, ticks / size, ticks * 0.99, ticks * 1.01, rounds,
                       0.95, gbps * 0.01)


def section(spec: KernelSpec, ms: list[Measurement], goals: dict[str, float], bpc: float = 6.4,
            peer_goals: dict | None = None) -> ledger.Section:
    result = BenchResult(spec={}, key_bits=128, tsc_hz=1e9, core_hz=1e9, measurements=ms,
                         peers={"boringssl": "BoringSSL 5.4.0", "openssl": "OpenSSL 3"})
    ops = {m.op for m in ms}
    result.ceiling_bounds = {op: OpCeiling(op, bpc, bpc, "AES", "test") for op in ops}
    result.ceilings = {op: bpc for op in ops}
    return ledger.Section(ledger.Plan("a title", "aesgen bench x", spec, goals, peer_goals or {}), result)


def test_signature_names_the_file_by_vendor_family_model():
    assert MACHINE.signature == "genuineintel-6-a7"


def test_goals_are_met_or_not_met_from_the_16k_figure():
    spec = KernelSpec(("ctr32", "xts"), "avx2", 256, 8)
    s = section(spec, [measured("ctr32_encrypt", 16384, "aesgen", 6.2), measured("xts_encrypt", 16384, "aesgen", 5.0)],
                {"ctr32_encrypt": 0.95, "xts_encrypt": 0.88})
    lines = ledger.goal_lines(s)
    assert lines == ["- ctr32_encrypt AES-128 at 16384 B: 96.9% of the ceiling, goal >= 95%: **met**",
                     "- xts_encrypt AES-128 at 16384 B: 78.1% of the ceiling, goal >= 88%: **not met**"]


def test_gcm_goal_is_the_ratio_to_boringssl_side_by_side():
    spec = KernelSpec(("gcm",), "avx512", 512, 4)
    ms = [measured("gcm_encrypt", n, impl, g) for n, impl, g in
          ((16384, "aesgen", 20.0), (16384, "boringssl", 16.0), (256, "aesgen", 8.0), (256, "boringssl", 9.0))]
    goals = {"gcm_encrypt": ("boringssl", ledger.GCM_GOALS["avx512"])}
    lines = ledger.peer_goal_lines(section(spec, ms, {}, peer_goals=goals))
    assert lines[0].startswith("- gcm_encrypt AES-128 vs boringssl at 16384 B: 1.25x ±") and lines[0].endswith("**met**")
    assert "not measured" in lines[1]  # no 1 KiB figures
    assert lines[2].startswith("- gcm_encrypt AES-128 vs boringssl at 256 B: 0.89x ±") and "**not met**" in lines[2]
    # the peer runs above the ceiling measured for our mix: the ceiling bounds nothing for it
    assert lines[2].endswith("1.00x needs 141%)")


def test_a_peer_goal_above_the_ceiling_says_it_is_out_of_reach():
    """A peer already near the ceiling leaves no room for the ratio a goal asks: the line says
    where both run against the ceiling measured there, and when the goal needs more than 100%."""
    spec = KernelSpec(("xts",), "avx512", 512, 6)
    ms = [measured("xts_encrypt", n, impl, g) for n, impl, g in
          ((16384, "aesgen", 6.2), (16384, "awslc", 6.1), (4096, "aesgen", 5.0), (4096, "awslc", 4.9))]
    goals = {"xts_encrypt": ("awslc", {16384: 1.05, 4096: 1.05})}
    big, small = ledger.peer_goal_lines(section(spec, ms, {}, peer_goals=goals))
    assert big.endswith("**not met** (awslc at 95% of the ceiling here, aesgen at 97%: 1.05x needs 100%, "
                        "above the ceiling: out of reach on this CPU)")
    assert small.endswith("**not met** (awslc at 77% of the ceiling here, aesgen at 78%: 1.05x needs 80%)")
    met = ledger.peer_goal_lines(section(spec, [measured("xts_encrypt", 16384, "aesgen", 6.2),
                                               measured("xts_encrypt", 16384, "awslc", 5.0)], {},
                                         peer_goals={"xts_encrypt": ("awslc", {16384: 1.05})}))
    assert met[0].endswith("**met**")


def test_a_figure_with_two_speeds_by_process_is_marked_and_named():
    """Rounds (one process each) whose medians fall in two groups: the row carries ~ and a line
    under the table gives both speeds (what its interval hides)."""
    spec = KernelSpec(("ecb",), "avx512", 512, 4)
    two = measured("ecb_encrypt", 16384, "aesgen", 18.5)
    two.modes_gbps = (18.1, 5, 18.95, 9)
    s = section(spec, [two, measured("ecb_encrypt", 256, "aesgen", 15.0)], {})
    rows = ledger.section_table(s)
    assert "| 18.50 ±0.18 ~ |" in rows[2] and " ~ |" not in rows[3]
    text = ledger.render(MACHINE, [s], "aesgen bench --all --record docs/perf/", "2026-11-27", "abc1234", [])
    assert "- ~ two speeds by process" in text and "ecb_encrypt 16384 B (aesgen): 18.10 GB/s in 5 rounds, 18.95 in 9" in text
    plain = ledger.render(MACHINE, [section(spec, [measured("ecb_encrypt", 16384, "aesgen", 18.5)], {})],
                          "aesgen bench --all --record docs/perf/", "2026-11-27", "abc1234", [])
    assert "two speeds" not in plain


def test_plans_hold_the_aes256_peer_goals_and_the_native_gcm_goal():
    native = KernelSpec(("ecb", "gcm", "xts"), "avx512", 512, 4)
    aes256 = KernelSpec(("gcm", "xts"), "avx512", 512, 4)
    first, second = ledger.plans(native, ("ecb", "gcm", "xts"), aes256)
    both = {op: ("boringssl", ledger.GCM_GOALS["avx512"]) for op in ("gcm_encrypt", "gcm_decrypt")}
    mix = {"gcm_encrypt": 0.85, "gcm_decrypt": 0.85}  # of the AES+CLMUL mix ceiling, at 16 KiB
    assert first.peer_goals == both and first.goals == mix
    assert second.key_bits == 256 and second.sizes == ledger.AES256_SIZES and second.goals == mix
    assert second.peer_goals["xts_encrypt"] == ("awslc", {16384: 1.05, 4096: 1.05})
    avx2 = KernelSpec(("ecb", "gcm", "xts"), "avx2", 256, 8)
    first, second = ledger.plans(avx2, ("ecb", "gcm", "xts"), avx2)
    assert "xts_encrypt" not in second.peer_goals and first.goals == {**ledger.REGISTER16_GOALS, **mix}


def test_the_avx2_view_plans_time_gcm_under_the_mask_against_the_avx2_goals():
    spec = KernelSpec(("gcm",), "avx2", 256, 8)
    plans = ledger.avx2_view_plans(spec, "avx512f,gfni")
    assert [p.key_bits for p in plans] == [128, 256]
    for p in plans:
        assert p.cpu_mask == "avx512f,gfni" and p.spec is spec and p.command.startswith("AESGEN_CPU_MASK=avx512f,gfni ")
        assert p.peer_goals == {op: ("boringssl", ledger.GCM_GOALS["avx2"]) for op in ("gcm_encrypt", "gcm_decrypt")}
        assert p.goals == {"gcm_encrypt": 0.85, "gcm_decrypt": 0.85}


def test_ledger_plans_add_the_avx2_view_only_on_an_avx512_cpu():
    from aesgen.cpu import flags
    from aesgen.tools.cli import ledger_plans
    views = [p for p in ledger_plans({}) if p.cpu_mask]
    if "avx512f" not in flags():
        assert views == []
        return
    assert len(views) == 2 and all(p.spec.isa == "avx2" and p.spec.modes == ("gcm",) for p in views)


def test_render_holds_the_command_date_cpu_table_and_a_figure_without_interval():
    spec = KernelSpec(("ecb",), "avx2", 256, 8)
    ms = [measured("ecb_encrypt", 256, "aesgen", 10.0, rounds=1), measured("ecb_encrypt", 256, "openssl", 5.0, 1)]
    text = ledger.render(MACHINE, [section(spec, ms, {})], "aesgen bench --all --record docs/perf", "2026-11-26",
                         "abc123", [("aesgen loop", "znver3", 50.0, 256)])
    assert "# aesgen on Test CPU" in text and "family 6 (0x6) model 167 (0xa7)" in text
    assert "Recorded 2026-11-26 with aesgen abc123: `aesgen bench --all --record docs/perf`" in text
    assert "| ecb_encrypt | 256 | 10.00 ±? | openssl | 5.00 | 2.00 ±? |" in text  # one round: no interval
    assert "| aesgen loop | znver3 | 50.0 | 256 | 5.12 |" in text
    assert text.rstrip().endswith("aes avx2 vaes avx512f")  # the flags as recorded


def test_record_requires_all_and_all_takes_no_modes():
    r = CliRunner().invoke(main, ["bench", "ecb", "--record", "x"])
    assert r.exit_code == 2 and "--record writes the ledger of a --all run" in r.output
    r = CliRunner().invoke(main, ["bench", "ecb", "--all"])
    assert r.exit_code == 2 and "give MODES or --all, not both" in r.output
