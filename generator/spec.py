"""KernelSpec: everything that identifies one generated file.

It is the contract between the generator and the verifier: the generator
embeds it as one JSON comment line (`# aesgen-spec: {...}`) in every `.S`,
so `aesgen verify FILE.S` and the round-trip check can regenerate exactly
what the generator meant.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .doubling import DOUBLING_MODES, default_method, needs_clmul
# The modes and the functions they export are the function registry's; a spec lists them.
from .functions import COMMON_FUNCTIONS, MODE_FUNCTIONS, MODES, mode_of  # noqa: F401  (mode_of: re-exported)

SPEC_MARKER = "# aesgen-spec: "

# The block-cipher modes (the ones `make demo`, tune and bench cover today).
CIPHER_MODES = ("ecb", "ctr32", "cbc")
# Modes that multiply by powers of the GHASH key stored after the AES schedule.
GHASH_TABLE_MODES = ("ghash", "gcm")
GCM_CTX_BYTES = 128  # P_GCM_CTX_BYTES: the streaming state, whatever the file's width
OCB_L_COUNT = 64  # L_0..L_63: enough for any block index below 2^64
# P_MULTIKEY_BYTES: one key's share of the multikey schedule (15 round keys and its round count,
# 16 bytes each); keys are stored in groups of `multikey_lanes` (layout in kernels/mpc.py).
MULTIKEY_BYTES = 256
LINE = 64  # a cache line: key tables read as whole vectors start on one, and the keys are that aligned

ISAS = ("sse", "avx", "avx2", "avx512")
WIDTHS_BY_ISA = {"sse": (128,), "avx": (128,), "avx2": (256,), "avx512": (128, 256, 512)}
REGISTERS_BY_ISA = {"sse": 16, "avx": 16, "avx2": 16, "avx512": 32}  # xmm/ymm/zmm registers (EVEX: 32)
BACKENDS = ("aesni", "gfni", "bitsliced")
# The modes the bitsliced backend implements (kernels/bitsliced.py).
BITSLICED_MODES = ("ecb", "ctr32", "cbc", "ghash", "polyval", "gcm", "gcm-siv")
ABIS = ("sysv", "win64")  # calling conventions (win64: generator/win64.py)
# Object formats of a SysV file: ELF (Linux, the BSDs...) or Mach-O (macOS). A win64 file is one
# format of its own (COFF for Windows, ELF for testing), recorded as "elf".
OBJECT_FORMATS = ("elf", "macho")
MAX_DEPTH = 16

# /proc/cpuinfo flag names each ISA family needs.
FEATURES_BY_ISA = {
    "sse": ("aes", "ssse3"),
    "avx": ("aes", "ssse3", "avx"),
    "avx2": ("aes", "ssse3", "avx", "avx2", "bmi2", "vaes"),  # every VAES CPU has BMI2 (shlx, shrx, sarx)
    "avx512": ("aes", "ssse3", "avx", "avx2", "bmi2", "vaes", "avx512f", "avx512bw", "avx512vl"),
}

CLMUL_MODES = ("ghash", "polyval", "gcm", "gcm-siv")
# How GHASH/POLYVAL multiply in GF(2^128) (--gfmul): the carry-less multiply, or without it
# (generator/lower_gfmul.py: integer multiplies with holes, or bit-logical), or GHASH's
# products by powers of H as GF(2) matrices applied with vgf2p8affineqb (kernels/ghash_planes.py).
GFMULS = ("clmul", "ctmul", "ctmul-gpr", "bitsliced", "gfni")
# The methods that serve only some functions (gfni: GHASH's hashing loops; ctmul-gpr: P_ghash
# and P_polyval, on GPRs, kernels/ghash_gpr.py), and how the file's other products are lowered.
PARTIAL_GFMULS = {"gfni": "ctmul", "ctmul-gpr": "ctmul"}
# --gfmul gfni: the powers of H kept as matrices: H^8 for eight interleaved Horner chains,
# H^1, H^2 and H^4 for joining them (kernels/ghash_planes.py); 16 x 16 qwords each.
GFNI_MATRIX_POWERS = (8, 4, 2, 1)
GFNI_MATRIX_BYTES = 16 * 16 * 8


# Without clmul, the depth GHASH/POLYVAL/GCM files get when none is given: each product is already
# hundreds of independent instructions, so deeper batches buy little and cost much code.
GFMUL_DEPTH = 2


def default_gfmul(backend: str, isa: str = "", hash_widths: tuple[int, ...] = ()) -> str:
    """AES-NI files multiply with pclmulqdq; the files without AES-NI (gfni, bitsliced) with no
    carry-less multiply either, by default: GF(2) matrices where the GFNI backend hashes at 512
    bits on AVX-512 (`hash_widths`: the widths of the file's hashing modes), else integer
    products with holes."""
    if backend == "aesni":
        return "clmul"
    if backend == "gfni" and isa == "avx512" and hash_widths and set(hash_widths) == {512}:
        return "gfni"
    return "ctmul"


def required_features(isa: str, width: int, modes: tuple[str, ...], gfdouble: str = "",
                      backend: str = "aesni", gfmul: str = "clmul") -> tuple[str, ...]:
    """/proc/cpuinfo flags a file needs: the ISA's, plus carry-less multiply when hashing
    (or doubling with it) with `clmul`; the GFNI backend swaps AES-NI/VAES for GFNI."""
    feats = list(FEATURES_BY_ISA[isa])
    if backend == "gfni":
        feats = [f for f in feats if f not in ("aes", "vaes")] + ["gfni"]
    if backend == "bitsliced":  # logic ops and byte shuffles only: no AES-NI, VAES or GFNI
        feats = [f for f in feats if f not in ("aes", "vaes")]
    if isa == "avx512" and "rijndael256" in modes:  # vpermt2b: Rijndael-256's ShiftRows in one op per half
        feats.append("avx512vbmi")
    doubling_clmul = any(m in DOUBLING_MODES for m in modes) and needs_clmul(gfdouble, width)
    if "otr" in modes and isa == "avx512" and backend == "aesni":  # its offset table is stored big-endian (kernels/otr.py)
        feats.append("movbe")
    if gfmul == "gfni" and any(m in CLMUL_MODES for m in modes):  # vpermt2b: blocks to byte planes
        feats += [f for f in ("gfni", "avx512vbmi") if f not in feats]
    if (any(m in CLMUL_MODES for m in modes) or doubling_clmul) and gfmul in ("clmul", ""):
        feats.append("pclmulqdq")
        if isa in ("avx2", "avx512"):  # ymm/zmm hashing; the xmm tails use it too on these files
            feats.append("vpclmulqdq")
    return tuple(feats)


def default_prefix(stem: str, modes: tuple[str, ...]) -> str:
    """stem_<modes>: the mode set, in MODES order, is part of every default prefix, so two files
    generated with different mode sets never define the same symbol (set_encrypt_key...) or
    include guard; the same set in another order gets the same prefix."""
    names = [re.sub(r"[^a-z0-9]", "", m) for m in MODES if m in modes]
    return "_".join([stem, *names])


C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def line_up(n: int) -> int:
    """n rounded up to a whole cache line (LINE bytes)."""
    return -(-n // LINE) * LINE


@dataclass(frozen=True)
class KernelSpec:
    modes: tuple[str, ...]
    isa: str
    width: int
    depth: int
    backend: str = "aesni"
    prefix: str = ""
    abi: str = "sysv"
    features: tuple[str, ...] = field(default=())
    # Per-mode (mode, width, depth) where a mode differs from width/depth (tuned files).
    # `width` must then be the widest: it sets the key schedule's stride.
    overrides: tuple[tuple[str, int, int], ...] = field(default=())
    # GHASH/POLYVAL products: Karatsuba (3 carry-less multiplies) instead of schoolbook (4).
    karatsuba: bool = False
    # XTS tweaks / doubling: the method (generator/doubling.py); "" = the ISA's default.
    gfdouble: str = ""
    # Allow methods that load from data-dependent addresses (not constant-time).
    table_lookups: bool = False
    # GF(2^128) multiplication of GHASH/POLYVAL (GFMULS); "" = the backend's default.
    gfmul: str = ""
    # Bitsliced backend on avx512: no VPTERNLOGD (S-box by the three-operand circuit compiler,
    # linear layers by two-input XORs) -- the comparison point for what ternary logic buys.
    no_ternlog: bool = False
    # SysV: no function touches memory below rsp (code run where the red zone is not kept,
    # such as an OS kernel built with -mno-red-zone); win64 has no red zone anyway.
    no_red_zone: bool = False
    # Every global symbol hidden (ELF .hidden, Mach-O .private_extern): a shared library that
    # links the file does not export the kernels.
    hidden: bool = False
    # The object format the .S is written for (OBJECT_FORMATS).
    object_format: str = "elf"
    # Instruction order within the interleaved blocks: "" lockstep (schedule.interleave), or the
    # target whose port table the list scheduler simulates (list_schedule), e.g. "zen3".
    schedule: str = ""

    def __post_init__(self) -> None:
        if self.abi not in ABIS:
            raise ValueError(f"unknown ABI '{self.abi}'; choose from {', '.join(ABIS)}")
        if self.object_format not in OBJECT_FORMATS:
            raise ValueError(f"unknown object format '{self.object_format}'; choose from {', '.join(OBJECT_FORMATS)}")
        if self.object_format != "elf" and self.abi != "sysv":
            raise ValueError(f"--format {self.object_format} is for the SysV convention (macOS); --abi {self.abi} "
                             "files are COFF for Windows (and ELF for testing)")
        object.__setattr__(self, "modes", tuple(self.modes))
        if not self.gfdouble and any(m in DOUBLING_MODES for m in self.modes):
            object.__setattr__(self, "gfdouble", default_method(self.isa, self.width))
        if not self.gfmul:
            object.__setattr__(self, "gfmul", self.default_gfmul)
        if self.gfmul != "clmul" and any(m in CLMUL_MODES for m in self.modes):
            # without clmul a product is a long sequence: Karatsuba's 3 instead of 4 (-24% time, less code)
            object.__setattr__(self, "karatsuba", True)
        if not self.prefix:
            object.__setattr__(
                self, "prefix", default_prefix(f"aesgen_{self.backend}_{self.isa}_{self.width}x{self.depth}", self.modes)
            )
        if not self.features:
            object.__setattr__(self, "features",
                               required_features(self.isa, self.width, self.modes, self.gfdouble, self.backend,
                                                 self.gfmul))
        object.__setattr__(self, "features", tuple(self.features))
        object.__setattr__(self, "overrides", tuple(tuple(o) for o in self.overrides))

    @property
    def default_gfmul(self) -> str:
        """The GF(2^128) method the file gets when none is asked for (default_gfmul)."""
        return default_gfmul(self.backend, self.isa, tuple(self.width_for(m) for m in self.modes if m in CLMUL_MODES))

    @property
    def red_zone_allowed(self) -> bool:
        """May a function keep scratch below rsp (the 128 bytes SysV leaves to leaf functions)?"""
        return self.abi == "sysv" and not self.no_red_zone

    def width_for(self, mode: str) -> int:
        return next((w for m, w, _ in self.overrides if m == mode), self.width)

    def depth_for(self, mode: str) -> int:
        return next((d for m, _, d in self.overrides if m == mode), self.depth)

    @property
    def max_group_blocks(self) -> int:
        """The most blocks any function handles per main-loop iteration."""
        return max(self.depth_for(m) * self.width_for(m) // 128 for m in self.modes)

    @property
    def vector_registers(self) -> int:
        """xmm/ymm/zmm registers the ISA has: 32 with AVX-512, else 16."""
        return REGISTERS_BY_ISA[self.isa]

    @property
    def lanes(self) -> int:
        """AES blocks held by one vector register."""
        return self.width // 128

    @property
    def key_stride(self) -> int:
        """Bytes between round keys in the opaque schedule (a key replicated per lane; bitsliced:
        its 8 bit-planes of width / 8 bytes each)."""
        return self.width if self.backend == "bitsliced" else self.width // 8

    @property
    def rounds_offset(self) -> int:
        """Offset of the 32-bit round count (10/12/14) in the key schedule."""
        return 15 * self.key_stride

    @property
    def key_bytes(self) -> int:
        return line_up(self.rounds_offset + 4)

    @property
    def functions(self) -> tuple[str, ...]:
        """Unprefixed names of every exported function, in file order."""
        names = list(COMMON_FUNCTIONS)
        for mode in self.modes:
            names.extend(MODE_FUNCTIONS[mode])
        return tuple(dict.fromkeys(names))

    @property
    def ghash_blocks(self) -> int:
        """K: blocks per GHASH reduction (lanes x depth), the number of powers of H stored."""
        users = [m for m in self.modes if m in GHASH_TABLE_MODES] or ["ghash"]
        if "gcm" in users and "ghash" not in users:  # gcm exports P_ghash, which runs at ghash's own depth
            users.append("ghash")
        return max(self.depth_for(m) * self.width_for(m) // 128 for m in users)

    @property
    def gcm_table_offset(self) -> int:
        """Where H^K is in the GCM key: after the AES schedule and H^(K+1) (just before it), on a
        64-byte boundary of the key, so that the hashing loops' vector loads of the powers do not
        split cache lines (GCM AES-256 at 512 x 8: 1.02x -> 1.05x BoringSSL at 16 KiB)."""
        return line_up(self.key_bytes + 16)

    @property
    def gcm_powers_bytes(self) -> int:
        """H^(K+1)..H^1 and their halves-xor, from H^(K+1) (at gcm_table_offset - 16) on."""
        return 2 * self.gcm_halves_offset

    @property
    def gcm_shifted_table_offset(self) -> int:
        """A copy of the table (powers and halves-xor, the same layout) 16 bytes past a 64-byte
        boundary: a message's last batch, whose powers shift up by one (H^(K+1)..H^2, the length
        block joining its reduction), reads them from here as aligned as the loop's."""
        return line_up(self.gcm_table_offset - 16 + self.gcm_powers_bytes) + 16

    @property
    def gcm_halves_offset(self) -> int:
        """From a power of H to its Karatsuba halves-xor in the GCM key."""
        return 16 * (self.ghash_blocks + 1)

    @property
    def gcm_matrix_offset(self) -> int:
        """--gfmul gfni: where the matrices of GFNI_MATRIX_POWERS start in the GCM key (64-byte
        aligned within it), after the powers of H and their halves-xor."""
        return line_up(self.gcm_shifted_table_offset - 16 + self.gcm_powers_bytes)

    @property
    def gcm_key_bytes(self) -> int:
        """AES schedule, then H^(K+1)..H^1 (16 bytes each), then their Karatsuba halves-xor,
        then a copy of both at another alignment (gcm_shifted_table_offset).
        (H^(K+1): a message's last K blocks and its length block share one reduction.)
        --gfmul gfni: then the matrices of multiplying by H^8, H^4, H^2 and H^1."""
        matrices = len(GFNI_MATRIX_POWERS) * GFNI_MATRIX_BYTES if self.gfmul == "gfni" else 0
        return self.gcm_matrix_offset + matrices

    @property
    def product_method(self) -> str:
        """How the file's remaining `clmul` products are computed: its --gfmul, but for gfni
        (whose matrices serve the hashing loops) and ctmul-gpr (P_ghash, P_polyval) the method
        PARTIAL_GFMULS names."""
        return PARTIAL_GFMULS.get(self.gfmul, self.gfmul)

    @property
    def gcm_ctx_bytes(self) -> int:
        """The streaming GCM state (layout in kernels/gcm_stream.py): 64-byte aligned by the caller."""
        return GCM_CTX_BYTES

    @property
    def gcmsiv_key_bytes(self) -> int:
        """The GCM-SIV key: the key-generating key's AES schedule, laid out like set_encrypt_key's."""
        return self.key_bytes

    @property
    def xts_key_bytes(self) -> int:
        """The XTS key: the data key's schedule (encrypt or decrypt), then the tweak key's."""
        return 2 * self.key_bytes

    # -- OCB (layout in kernels/ocb.py) ---------------------------------------
    @property
    def ocb_batch_blocks(self) -> int:
        """B: blocks per OCB main-loop batch (depth x lanes), the length of its offset table."""
        return self.depth_for("ocb") * self.width_for("ocb") // 128

    @property
    def ocb_l_offset(self) -> int:
        """L_*, L_$, L_0..L_63 after the encryption and decryption schedules."""
        return 2 * self.key_bytes

    @property
    def ocb_table_offset(self) -> int:
        """T_0..T_{B+lanes-2}: T_j = L_ntz(1) ^ ... ^ L_ntz(j), the offsets within a batch, with
        T_1 on a 64-byte boundary of the key: a batch (blocks s+1 .. s+B) loads its vectors of
        them from T_1 on, and they must not split cache lines (when the table sat 32 bytes past
        one, every zmm load split)."""
        return line_up(self.ocb_l_offset + 16 * (2 + OCB_L_COUNT) + 16) - 16

    @property
    def ocb_step_offset(self) -> int:
        """Q_0..Q_63: Q_k = T_{B-1} ^ L_k, one batch's offset step when the next starts at a
        block index with k trailing zeros."""
        lanes = self.width_for("ocb") // 128
        return self.ocb_table_offset + 16 * (self.ocb_batch_blocks + lanes - 1)

    @property
    def ocb_key_bytes(self) -> int:
        return line_up(self.ocb_step_offset + 16 * OCB_L_COUNT)
    # -- batched multi-key AES (layout in kernels/mpc.py) ----------------------
    @property
    def multikey_lanes(self) -> int:
        """Keys per group of the multikey schedule: the lanes of one multikey vector."""
        return self.width_for("multikey") // 128

    @property
    def multikey_rounds_offset(self) -> int:
        """Where a multikey group keeps its first key's round count (after 15 rows of round keys)."""
        return 15 * 16 * self.multikey_lanes

    def multikey_schedule_bytes(self, nkeys: int) -> int:
        """Bytes of the multikey schedule of nkeys keys: whole groups of multikey_lanes keys."""
        groups = -(-nkeys // self.multikey_lanes)
        return max(1, groups) * self.multikey_lanes * MULTIKEY_BYTES

    @property
    def public_load_disps(self) -> tuple[int, ...]:
        """Displacements of the 4-byte round-count loads (public by design) in this file's kernels."""
        disps = [self.rounds_offset]
        if "multikey" in self.modes:
            disps.append(self.multikey_rounds_offset)
        return tuple(dict.fromkeys(disps))

    @property
    def otr_q_offset(self) -> int:
        """Where Q = E_K(0^128), the AD hash's mask seed, follows the AES schedule in the OTR key."""
        return self.key_bytes

    @property
    def otr_key_bytes(self) -> int:
        """The OTR key: the AES encryption schedule, then Q (16 bytes, as E_K produced it)."""
        return line_up(self.otr_q_offset + 16)

    @property
    def rijndael256_key_bytes(self) -> int:
        """The Rijndael-256 schedule: 30 half round keys (120 words), each replicated per lane."""
        return line_up(30 * self.key_stride)

    def symbol(self, function: str) -> str:
        """The C name of a function."""
        return f"{self.prefix}_{function}"

    def asm_symbol(self, function: str) -> str:
        """Its name in the assembly: Mach-O puts an underscore before every C name."""
        return ("_" if self.object_format == "macho" else "") + self.symbol(function)

    @property
    def local_label_prefix(self) -> str:
        """What makes a label assembler-local (kept out of the object's symbol table)."""
        return "L" if self.object_format == "macho" else ".L"

    def to_json(self) -> str:
        d = asdict(self)
        d["modes"] = list(self.modes)
        d["features"] = list(self.features)
        d["overrides"] = [list(o) for o in self.overrides]
        for name in ("gfdouble", "table_lookups", "no_ternlog", "no_red_zone", "hidden", "schedule"):  # only where they apply: older files stay as they were
            if not d[name]:
                del d[name]
        if d["object_format"] == "elf":
            del d["object_format"]
        if d["gfmul"] == self.default_gfmul:  # older files stay as they were
            del d["gfmul"]
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "KernelSpec":
        d = json.loads(text)
        d["modes"] = tuple(d["modes"])
        d["features"] = tuple(d["features"])
        d["overrides"] = tuple(tuple(o) for o in d.get("overrides", ()))
        return cls(**d)

    @classmethod
    def from_asm(cls, path: Path | str) -> "KernelSpec":
        """Read the spec line a generated `.S` carries in its header."""
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith(SPEC_MARKER):
                    return cls.from_json(line[len(SPEC_MARKER):])
        raise ValueError(f"{path}: not an aesgen file (no '{SPEC_MARKER.strip()}' line)")
