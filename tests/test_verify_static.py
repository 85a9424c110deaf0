"""Static verification: object decoding, constant-time scan, round trip."""
from __future__ import annotations

import dataclasses
import types
from pathlib import Path

import pytest
from iced_x86 import Code, Instruction, MemoryOperand, Register

from aesgen import declassify
from aesgen.spec import KernelSpec
from aesgen.verify import disasm, roundtrip, static_ct
from aesgen.verify.results import CheckResult

FIXTURES = Path(__file__).parent / "fixtures"
CLEAN = FIXTURES / "static_clean.S"
LEAKS = FIXTURES / "static_leaks.S"
ROUNDTRIP = FIXTURES / "static_roundtrip.S"
ROUNDS_OFFSET = 240  # 15 round keys of 16 bytes: the 128-bit-width layout


# ---------------------------------------------------------------------------- disasm

def test_functions_symbols_and_padding() -> None:
    dis = disasm.load(CLEAN)
    names = [f.name for f in dis.functions]
    assert names == ["clean_ecb", "clean_cpu"]  # the padding between them is no function
    ecb, cpu = dis.functions
    assert ecb.offset == 0 and cpu.offset % 32 == 0 and cpu.offset >= ecb.size
    assert disasm.gas_text(ecb.instructions[0]) == "endbr64"
    assert disasm.gas_text(ecb.instructions[-1]) == "ret"
    assert disasm.gas_text(cpu.instructions[-1]) == "ret"
    # The whole-section listing holds both functions and the NOPs between them.
    assert len(dis.text) > len(ecb.instructions) + len(cpu.instructions)


def test_relocations_are_attached_to_instructions() -> None:
    fn = disasm.load(CLEAN).function("clean_ecb")
    assert fn is not None
    relocated = [ins for ins in fn.instructions if ins.ip in fn.relocations]
    assert relocated and all(ins.is_ip_rel_memory_operand for ins in relocated)
    r = fn.relocations[relocated[0].ip]
    assert r.type_name == "R_X86_64_PC32" and r.symbol == ".rodata"
    assert relocated[0].ip < r.offset < relocated[0].next_ip


def test_assemble_error_is_one_line_plus_stderr(tmp_path: Path) -> None:
    bad = tmp_path / "bad.S"
    bad.write_text("    .text\n    vpxorr %xmm0, %xmm0, %xmm0\n")
    with pytest.raises(disasm.AssembleError) as e:
        disasm.assemble(bad)
    first, _, rest = str(e.value).partition("\n")
    assert str(bad) in first and "failed" in first
    assert "vpxorr" in rest


def test_assemble_is_cached(tmp_path: Path) -> None:
    src = tmp_path / "a.S"
    src.write_text("    .text\nf:  ret\n")
    first = disasm.assemble(src)
    assert disasm.assemble(src) == first
    src.write_text("    .text\nf:  nop\n    ret\n")  # new content: a new object
    assert disasm.assemble(src) != first
    assert [disasm.gas_text(i) for i in disasm.load(src).text] == ["nop", "ret"]


def test_stray_code_outside_symbols_becomes_a_pseudo_function(tmp_path: Path) -> None:
    src = tmp_path / "stray.S"
    src.write_text("    .text\n    .globl f\n    .type f,@function\nf:  ret\n    .size f,.-f\n"
                   "    mov (%rdi), %rax\n    jmp *%rax\n")
    fns = disasm.disassemble(src)
    assert [f.is_symbol for f in fns] == [True, False]
    assert any(v.rule == static_ct.RULE_INDIRECT
               for v in static_ct.scan(fns, public_load_disps={ROUNDS_OFFSET}))


# ---------------------------------------------------------------------------- constant time

def _violations(path: Path, **kw) -> dict[str, list[static_ct.Violation]]:
    kw.setdefault("public_load_disps", {ROUNDS_OFFSET})
    out: dict[str, list[static_ct.Violation]] = {}
    for v in static_ct.scan(disasm.disassemble(path), **kw):
        out.setdefault(v.function, []).append(v)
    return out


def test_clean_code_passes() -> None:
    assert _violations(CLEAN) == {}


def test_rounds_load_is_only_public_at_its_offset() -> None:
    # Without the exemption, the branch on the round count is a secret branch.
    found = _violations(CLEAN, public_load_disps=())
    rules = {(v.function, v.rule) for vs in found.values() for v in vs}
    assert rules == {("clean_ecb", static_ct.RULE_BRANCH)}


EXPECTED_LEAKS = {
    "leak_table": (static_ct.RULE_ADDRESS, "movzbl"),
    "leak_vptest": (static_ct.RULE_BRANCH, "je"),
    "leak_index": (static_ct.RULE_ADDRESS, "mov (%rsi,%rax)"),
    "leak_cmov": (static_ct.RULE_BRANCH, "cmove"),
    "leak_jump": (static_ct.RULE_INDIRECT, "jmp *%rax"),
    "leak_div": (static_ct.RULE_VARTIME, "div %rcx"),
    "leak_spill": (static_ct.RULE_ADDRESS, "mov (%rsi,%rcx,8)"),
    "leak_flow": (static_ct.RULE_ADDRESS, "mov (%rsi,%r8)"),
    "leak_rounds_index": (static_ct.RULE_ADDRESS, "mov (%rsi,%rax)"),
}


@pytest.mark.parametrize("function", sorted(EXPECTED_LEAKS))
def test_each_rule_is_caught(function: str) -> None:
    rule, text = EXPECTED_LEAKS[function]
    found = _violations(LEAKS).get(function, [])
    assert [(v.rule, v.severity) for v in found] == [(rule, "error")], found
    v = found[0]
    assert v.text.startswith(text)
    fn = disasm.load(LEAKS).function(function)
    assert fn is not None and fn.offset <= v.offset < fn.offset + fn.size
    assert function in str(v) and rule in str(v)


def test_table_lookups_can_be_downgraded_to_warnings() -> None:
    found = _violations(LEAKS, allow_table_lookups=True)
    assert [v.severity for v in found["leak_table"]] == ["warning"]
    assert [v.severity for v in found["leak_jump"]] == ["error"]  # other rules stay errors


def _spec_file(tmp_path: Path, body_patch: tuple[str, str] | None = None) -> tuple[KernelSpec, Path]:
    """A tiny file exporting every function of an ECB spec (prefix `t`)."""
    spec = KernelSpec(modes=("ecb",), isa="avx", width=128, depth=1, prefix="t")
    assert spec.rounds_offset == ROUNDS_OFFSET
    lines = ["    .text"]
    for name in spec.functions:
        sym = spec.symbol(name)
        lines += [f"    .globl {sym}", f"    .type {sym},@function", "    .p2align 4", f"{sym}:",
                  "    endbr64"]
        if name.startswith("ecb"):
            lines += ["    movl 240(%rdi), %eax", "    cmp $12, %eax", "    jb 1f",
                      "    vmovdqu (%rsi), %xmm0", "    vpxor (%rdi), %xmm0, %xmm0",
                      "    vmovdqu %xmm0, (%rdx)", "1:"]
        lines += ["    xor %eax, %eax", "    ret", f"    .size {sym}, .-{sym}"]
    text = "\n".join(lines) + "\n"
    if body_patch:
        assert body_patch[0] in text
        text = text.replace(body_patch[0], body_patch[1], 1)
    path = tmp_path / "t.S"
    path.write_text(text)
    return spec, path


def test_check_one_result_per_exported_function(tmp_path: Path) -> None:
    spec, path = _spec_file(tmp_path)
    results = static_ct.check(spec, path)
    assert [r.name for r in results] == [f"ct {f}" for f in spec.functions]
    assert all(isinstance(r, CheckResult) and r.status == "pass" for r in results), results


def test_check_reports_the_leaking_function(tmp_path: Path) -> None:
    spec, path = _spec_file(tmp_path, ("    vmovdqu %xmm0, (%rdx)",
                                       "    vmovd %xmm0, %ecx\n    vmovdqu %xmm0, (%rdx,%rcx)"))
    by_name = {r.name: r for r in static_ct.check(spec, path)}
    assert by_name["ct ecb_encrypt"].status == "fail"
    assert "secret-address" in by_name["ct ecb_encrypt"].detail
    assert by_name["ct ecb_decrypt"].status == "pass"
    downgraded = {r.name: r for r in static_ct.check(spec, path, allow_table_lookups=True)}
    assert downgraded["ct ecb_encrypt"].status == "pass"
    assert "warning" in downgraded["ct ecb_encrypt"].detail


def test_check_missing_symbol_and_bad_file(tmp_path: Path) -> None:
    spec, path = _spec_file(tmp_path)
    path.write_text(path.read_text().replace("t_cpu_supported", "t_cpu_probe"))
    by_name = {r.name: r for r in static_ct.check(spec, path)}
    assert by_name["ct cpu_supported"].status == "fail"
    assert "not found" in by_name["ct cpu_supported"].detail
    assert by_name["ct t_cpu_probe"].status == "pass"  # unlisted functions are scanned too
    (tmp_path / "bad.S").write_text("    bogus\n")
    [r] = static_ct.check(spec, tmp_path / "bad.S")
    assert r.status == "fail" and "failed" in r.detail


# ---------------------------------------------------------------------------- round trip

def _rip(displ: int = 0x1000) -> MemoryOperand:
    return MemoryOperand(Register.RIP, displ=displ)


def _mem(base: Register) -> MemoryOperand:
    return MemoryOperand(base)


def _intended() -> list[Instruction]:
    """What static_roundtrip.S means, built as a generator would (ips are label ids)."""
    C, R = Code, Register
    loop, done = 100, 200
    insns = [
        Instruction.create(C.ENDBR64),
        Instruction.create_reg_reg(C.TEST_RM64_R64, R.RCX, R.RCX),
        Instruction.create_branch(C.JE_REL32_64, done),
        Instruction.create_reg_mem(C.VEX_VMOVDQU_XMM_XMMM128, R.XMM3, _rip()),
        Instruction.create_reg_mem(C.VEX_VMOVDQU_XMM_XMMM128, R.XMM0, _mem(R.RSI)),
        Instruction.create_reg_reg_reg(C.VEX_VPSHUFB_XMM_XMM_XMMM128, R.XMM0, R.XMM0, R.XMM3),
        Instruction.create_reg_reg_reg(C.VEX_VPXOR_XMM_XMM_XMMM128, R.XMM0, R.XMM0, R.XMM1),
        Instruction.create_reg_reg_reg(C.VEX_VAESENC_XMM_XMM_XMMM128, R.XMM0, R.XMM0, R.XMM2),
        Instruction.create_mem_reg(C.VEX_VMOVDQU_XMMM128_XMM, _mem(R.RDX), R.XMM0),
        Instruction.create_reg_i32(C.ADD_RM64_IMM8, R.RSI, 16),
        Instruction.create_reg_i32(C.ADD_RM64_IMM8, R.RDX, 16),
        Instruction.create_reg(C.DEC_RM64, R.RCX),
        Instruction.create_branch(C.JNE_REL32_64, loop),
        Instruction.create(C.RETNQ),
    ]
    insns[4].ip = loop
    insns[13].ip = done
    return insns


def test_roundtrip_matches() -> None:
    decoded = disasm.load(ROUNDTRIP).text
    assert roundtrip.compare(_intended(), decoded) == []


def test_roundtrip_operand_changed() -> None:
    intended = _intended()
    intended[6] = Instruction.create_reg_reg_reg(
        Code.VEX_VPXOR_XMM_XMM_XMMM128, Register.XMM0, Register.XMM0, Register.XMM4)
    [msg] = roundtrip.compare(intended, disasm.load(ROUNDTRIP).text)
    assert msg.startswith("#6 ") and "%xmm4" in msg and "%xmm1" in msg


def test_roundtrip_vex_vs_evex(tmp_path: Path) -> None:
    evex = tmp_path / "evex.S"
    evex.write_text(ROUNDTRIP.read_text().replace("    vaesenc", "    {evex} vaesenc"))
    [msg] = roundtrip.compare(_intended(), disasm.load(evex).text)
    assert "#7 " in msg and "EVEX_VAESENC" in msg and "VEX_VAESENC" in msg


def test_roundtrip_missing_instruction() -> None:
    intended = _intended()
    del intended[10]  # the generator "forgot" add $16,%rdx; the object still has it
    msgs = roundtrip.compare(intended, disasm.load(ROUNDTRIP).text)
    assert msgs[0].startswith("length: intended 13")
    assert any("extra" in m and "add $0x10,%rdx" in m for m in msgs), msgs


def test_roundtrip_wrong_branch_target_and_mnemonic() -> None:
    intended = _intended()
    intended[12] = Instruction.create_branch(Code.JNE_REL32_64, 200)  # loops to the `ret`
    [msg] = roundtrip.compare(intended, disasm.load(ROUNDTRIP).text)
    assert "targets instruction #4, intended #13" in msg
    intended[12] = Instruction.create_branch(Code.JB_REL32_64, 100)
    [msg] = roundtrip.compare(intended, disasm.load(ROUNDTRIP).text)
    assert "jb" in msg and "jne" in msg


def test_roundtrip_rip_displacement_is_ignored_but_not_the_register() -> None:
    intended = _intended()
    intended[3] = Instruction.create_reg_mem(Code.VEX_VMOVDQU_XMM_XMMM128, Register.XMM3,
                                             _rip(0x7777))
    assert roundtrip.compare(intended, disasm.load(ROUNDTRIP).text) == []
    intended[3] = Instruction.create_reg_mem(Code.VEX_VMOVDQU_XMM_XMMM128, Register.XMM5, _rip())
    assert len(roundtrip.compare(intended, disasm.load(ROUNDTRIP).text)) == 1


def test_roundtrip_check_uses_the_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = KernelSpec(modes=("ecb",), isa="avx", width=128, depth=1)
    intended = _intended()
    monkeypatch.setattr(roundtrip, "generate", lambda s: types.SimpleNamespace(instructions=intended))
    assert roundtrip.check(spec, ROUNDTRIP) == [
        CheckResult("roundtrip", "pass", f"{len(intended)} instructions match")]
    intended.pop()
    [r] = roundtrip.check(spec, ROUNDTRIP)
    assert r.status == "fail" and "length" in r.detail


DECLASSIFY_IN_ECB = ("    vmovdqu (%rsi), %xmm0", "{mark}:\n    vmovdqu (%rsi), %xmm0")


def test_a_declassification_the_record_does_not_name_fails(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A `*_ct_declassify_<reason>_*` mark overrides the taint analysis; only a function whose
    record in generator/functions.py names that reason may carry one (docs/abi.md, Constant
    time). ECB names none: a verdict mark in ecb_encrypt fails it (as CTR32's counter word,
    declassified in b06785b, would have failed)."""
    mark = "t_ecb_encrypt_ct_declassify_verdict_7"
    spec, path = _spec_file(tmp_path, (DECLASSIFY_IN_ECB[0], DECLASSIFY_IN_ECB[1].format(mark=mark)))
    by_name = {r.name: r for r in static_ct.check(spec, path)}
    assert by_name["ct ecb_encrypt"].status == "fail"
    assert mark in by_name["ct ecb_encrypt"].detail and "verdict public by design" in by_name["ct ecb_encrypt"].detail
    assert by_name["ct ecb_decrypt"].status == "pass"  # the mark is pinned on its own function
    # a record naming another reason is not enough: the mark's own reason must be named
    named = dict(static_ct.FUNCTIONS)
    named["ecb_encrypt"] = dataclasses.replace(named["ecb_encrypt"], public_by_design=("nonce_bits",))
    monkeypatch.setattr(static_ct, "FUNCTIONS", named)
    assert {r.name: r for r in static_ct.check(spec, path)}["ct ecb_encrypt"].status == "fail"
    named["ecb_encrypt"] = dataclasses.replace(named["ecb_encrypt"], public_by_design=("verdict",))
    assert {r.name: r for r in static_ct.check(spec, path)}["ct ecb_encrypt"].status == "pass"


def test_a_mark_without_a_known_reason_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mark must say which value it declassifies, even in a function that may declassify."""
    named = dict(static_ct.FUNCTIONS)
    named["ecb_encrypt"] = dataclasses.replace(named["ecb_encrypt"], public_by_design=("verdict",))
    monkeypatch.setattr(static_ct, "FUNCTIONS", named)
    for mark in ("t_ecb_encrypt_ct_declassify7", "t_ecb_encrypt_ct_declassify_counter_word_7"):
        spec, path = _spec_file(tmp_path, (DECLASSIFY_IN_ECB[0], DECLASSIFY_IN_ECB[1].format(mark=mark)))
        result = {r.name: r for r in static_ct.check(spec, path)}["ct ecb_encrypt"]
        assert result.status == "fail" and "no reason" in result.detail, mark


def test_a_win64_argument_mark_needs_no_record(tmp_path: Path) -> None:
    """win64 wrappers copy arguments (pointers, lengths: public by the contract)."""
    mark = f"t_ecb_encrypt_{declassify.stem('win64_argument')}5"
    spec, path = _spec_file(tmp_path, (DECLASSIFY_IN_ECB[0], DECLASSIFY_IN_ECB[1].format(mark=mark)))
    assert {r.name: r for r in static_ct.check(spec, path)}["ct ecb_encrypt"].status == "pass"


def test_reasons_round_trip_through_symbols() -> None:
    for reason in declassify.REASONS:
        assert declassify.reason_of(f"p_gcm_decrypt_{declassify.stem(reason)}12") == reason
    with pytest.raises(ValueError, match="not one of"):
        declassify.stem("counter_word")
    with pytest.raises(ValueError, match="no declassify reason"):
        dataclasses.replace(static_ct.FUNCTIONS["ecb_encrypt"], public_by_design=("the counter",))


def test_every_record_that_declassifies_says_what() -> None:
    """The records that name something public by design (one line each, for docs and reviews)."""
    from aesgen.functions import FUNCTIONS
    named = {n for n, f in FUNCTIONS.items() if f.public_by_design}
    assert {"gcm_decrypt", "ocb_encrypt", "ocb_decrypt", "otr_decrypt", "gcmsiv_decrypt",
            "gcm_encrypt_update", "cbc_encrypt_multi"} <= named
    assert FUNCTIONS["ocb_decrypt"].public_by_design == ("nonce_bits", "verdict")
    assert FUNCTIONS["gcm_decrypt"].public_by_design == ("verdict",)
    assert not {"ctr32_encrypt", "ecb_encrypt", "cbc_encrypt", "xts_encrypt", "gcm_encrypt"} & named
