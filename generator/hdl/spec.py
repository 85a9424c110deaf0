"""What `aesgen hdl` builds: one core's configuration, its checks, and its regenerate command."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..circuits import CIRCUIT_FILES
from .structure import rounds

ARCHS = ("iterative", "pipelined", "unrolled-K")
KEY_SCHEDULES = ("on-the-fly", "loaded")
TABLE = "table"
# --sbox NAME -> (forward circuit, inverse circuit or None); "table" is a case statement of
# aesref's tables. The key schedule always uses the forward S-box.
SBOX_CIRCUITS: dict[str, tuple[str, str | None]] = {
    "bp113": ("sbox_bp113", "inv_sbox_bp121"),
    "depth16": ("sbox_bp128_depth16", "inv_sbox_bp121"),  # the inverse is the same paper's construction
    "canright": ("sbox_canright", "inv_sbox_canright"),
}
SBOX_CHOICES = (*SBOX_CIRCUITS, TABLE)
_UNROLLED = re.compile(r"unrolled-(\d+)$")


class HdlConfigError(ValueError):
    """A configuration aesgen hdl cannot build; the message is one line for the user."""


@dataclass(frozen=True)
class HdlSpec:
    bits: int
    arch: str                 # "iterative", "pipelined" or "unrolled-K" with K a number
    sbox: str                 # a key of SBOX_CIRCUITS, or "table"
    prefix: str
    stages_per_round: int = 1
    decrypt: bool = False
    key_schedule: str = "on-the-fly"
    ctr: bool = False

    def __post_init__(self) -> None:
        check(self)

    @property
    def rounds(self) -> int:
        return rounds(self.bits)

    @property
    def pipelined(self) -> bool:
        return self.arch == "pipelined"

    @property
    def per_clock(self) -> int:
        """Rounds one clock applies in the iterative and unrolled cores."""
        m = _UNROLLED.match(self.arch)
        return int(m.group(1)) if m else 1

    @property
    def stages(self) -> int:
        return self.rounds * self.stages_per_round

    @property
    def otf(self) -> bool:
        return self.key_schedule == "on-the-fly"

    def circuit(self, inverse: bool) -> str | None:
        """The circuit of the forward (or inverse) S-box, or None for the table."""
        if self.sbox == TABLE:
            return None
        return SBOX_CIRCUITS[self.sbox][1 if inverse else 0]

    def clocks_per_block(self) -> float:
        """Steady state with out_ready held high: the iterative cores load a block (whitening)
        and run Nr / K clocks; the pipeline takes one block a clock."""
        return 1.0 if self.pipelined else 1 + self.rounds // self.per_clock

    def latency(self) -> int:
        return self.stages if self.pipelined else 1 + self.rounds // self.per_clock

    def command(self, out_dir: str = "DIR") -> str:
        opts = f" --stages-per-round {self.stages_per_round}" if self.pipelined else ""
        opts += " --decrypt" if self.decrypt else ""
        opts += f" --key-schedule {self.key_schedule}"
        opts += " --ctr" if self.ctr else ""
        return (f"aesgen hdl --bits {self.bits} --arch {self.arch} --sbox {self.sbox}{opts} "
                f"--prefix {self.prefix} -o {out_dir}")


def check(spec: HdlSpec) -> None:
    """Refuse what cannot be built, with one line naming why."""
    if spec.bits not in (128, 192, 256):
        raise HdlConfigError(f"--bits {spec.bits}: AES keys are 128, 192 or 256 bits")
    if spec.arch not in ("iterative", "pipelined") and not _UNROLLED.match(spec.arch):
        raise HdlConfigError(f"--arch {spec.arch}: one of iterative, pipelined, unrolled-K (K rounds a clock)")
    k = spec.per_clock
    if k < 1 or spec.rounds % k:
        divisors = [d for d in range(1, spec.rounds + 1) if spec.rounds % d == 0]
        raise HdlConfigError(f"--arch {spec.arch}: K must divide the {spec.rounds} rounds of AES-{spec.bits} "
                             f"(one of {', '.join(map(str, divisors))})")
    if spec.sbox not in SBOX_CHOICES:
        raise HdlConfigError(f"--sbox {spec.sbox}: one of {', '.join(SBOX_CHOICES)}")
    if spec.decrypt and spec.sbox != TABLE and spec.circuit(True) is None:
        raise HdlConfigError(f"--sbox {spec.sbox} --decrypt: the circuits library has no inverse for it")
    if spec.stages_per_round not in (1, 2):
        raise HdlConfigError(f"--stages-per-round {spec.stages_per_round}: 1 or 2")
    if spec.stages_per_round != 1 and not spec.pipelined:
        raise HdlConfigError("--stages-per-round applies to --arch pipelined only")
    if spec.key_schedule not in KEY_SCHEDULES:
        raise HdlConfigError(f"--key-schedule {spec.key_schedule}: one of {', '.join(KEY_SCHEDULES)}")
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", spec.prefix):
        raise HdlConfigError(f"--prefix {spec.prefix!r}: a Verilog identifier (a letter, then letters, digits, _)")
    if spec.ctr and spec.decrypt:
        raise HdlConfigError("--ctr --decrypt: CTR decrypts with the encryption core; leave out --decrypt")
    for inverse in (False, True):  # the names SBOX_CIRCUITS gives are shipped circuits
        if spec.circuit(inverse) not in (None, *CIRCUIT_FILES):
            raise HdlConfigError(f"--sbox {spec.sbox}: circuit {spec.circuit(inverse)} is not shipped")
