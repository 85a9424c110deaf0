"""Register allocation: virtual vector registers onto xmm/ymm/zmm 0..R-1.

Per path (one per AES key size): pinned registers (loop-carried state) get a
register for the whole path; round keys get registers while they fit and are
memory operands on the key schedule otherwise; temporaries, which never cross
a label, are allocated by a linear scan of each straight-line region (optimal
for straight-line code: the register count is the maximum number live).
Legacy SSE ties the destination to the first source; when that source stays
live a copy is inserted. A path that cannot fit raises `RegisterPressure`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import ops
from .ir import BuildError, Branch, Insn, KeyRef, Label, Mark, Mem, Phys, VReg


class RegisterPressure(BuildError):
    pass


@dataclass
class Allocation:
    insns: list  # Insn (operands Phys / Mem / ...), Label, Branch, Mark
    key_regs: dict[int, int] = field(default_factory=dict)
    spilled_keys: list[int] = field(default_factory=list)
    registers_used: int = 0


def _splits(it) -> bool:
    """A straight-line region ends at a branch, a label, and a mark that values may not live across."""
    return isinstance(it, (Branch, Label)) or (isinstance(it, Mark) and not it.values_live_across)


def _regions(items: list) -> list[list[Insn]]:
    regions, cur = [], []
    for it in items:
        if _splits(it):
            regions.append(cur)
            cur = []
        else:
            cur.append(it)
    regions.append(cur)
    return regions


class _Scan:
    def __init__(self, nregs: int, legacy: bool, key_base: str, key_stride: int,
                 key_regs: dict[int, int], pinned: dict[int, int], key_disp: int = 0) -> None:
        self.nregs, self.legacy = nregs, legacy
        self.key_base, self.key_stride, self.key_disp = key_base, key_stride, key_disp
        self.key_regs, self.pinned = key_regs, pinned
        reserved = set(key_regs.values()) | set(pinned.values())
        self.pool = [r for r in range(nregs) if r not in reserved]
        self.high_water = 0

    def operand(self, op, where: dict[int, int], width: int):
        if isinstance(op, VReg):
            if op.pinned:
                return Phys(self.pinned[op.id], op.role)
            return Phys(where[op.id], op.role)
        if isinstance(op, KeyRef):
            if op.index in self.key_regs:
                return Phys(self.key_regs[op.index], f"KEY{op.index}")
            return Mem(self.key_base, self.key_disp + op.index * self.key_stride, bits=width)
        return op

    def region(self, insns: list[Insn]) -> list[Insn]:
        last_use: dict[int, int] = {}
        for n, i in enumerate(insns):
            for s in getattr(i, "srcs", ()):
                if isinstance(s, VReg) and not s.pinned:
                    last_use[s.id] = n
        free = list(reversed(self.pool))  # pop() hands out low numbers first (VEX-encodable)
        where: dict[int, int] = {}
        out: list[Insn] = []
        for n, i in enumerate(insns):
            if isinstance(i, Mark):  # one that values live across: passed through
                out.append(i)
                continue
            srcs = list(i.srcs)
            for s in srcs:
                if isinstance(s, VReg) and not s.pinned and s.id not in where:
                    raise BuildError(f"internal: {s} crosses a label or is read before written")
            dying = [s for s in dict.fromkeys(x for x in srcs if isinstance(x, VReg) and not x.pinned)
                     if last_use.get(s.id) == n]
            dst = i.dst
            tied = ops.tied(i.op, self.legacy)
            if tied and isinstance(dst, VReg) and ops.commutative(i):
                # Tie to dst itself if it is a source, else prefer a source that dies here:
                # either way no copy is needed.
                want = next((k for k, x in enumerate(srcs) if x is dst), None) if dst.pinned else \
                    next((k for k, x in enumerate(srcs) if isinstance(x, VReg) and x in dying
                          and not x.pinned), None)
                if want and not (not dst.pinned and isinstance(srcs[0], VReg) and srcs[0] in dying):
                    srcs = [srcs[want]] + srcs[:want] + srcs[want + 1:]
            copy_from = None
            if isinstance(dst, VReg) and not dst.pinned:
                if tied and isinstance(srcs[0], VReg) and srcs[0] in dying and not srcs[0].pinned:
                    where[dst.id] = where[srcs[0].id]
                    dying.remove(srcs[0])
                    for s in dying:
                        free.append(where[s.id])
                elif tied:
                    # The copy writes dst before the op reads the second source: dst must
                    # not take a register freed by this instruction.
                    if not free:
                        raise RegisterPressure("out of vector registers")
                    where[dst.id] = free.pop()
                    copy_from = srcs[0]
                    for s in dying:
                        free.append(where[s.id])
                else:
                    for s in dying:
                        free.append(where[s.id])
                    if not free:
                        raise RegisterPressure("out of vector registers")
                    where[dst.id] = free.pop()
            else:
                for s in dying:
                    free.append(where[s.id])
                if tied and isinstance(dst, VReg) and srcs[0] is not dst:
                    copy_from = srcs[0]
            in_use = len(self.pool) - len(free)
            self.high_water = max(self.high_water, in_use)
            pdst = self.operand(dst, where, i.width)
            psrcs = [self.operand(s, where, i.width) for s in srcs]
            if copy_from is not None:
                if any(isinstance(p, Phys) and p.num == pdst.num for p in psrcs[1:]):
                    raise BuildError(f"internal: {i.op} cannot tie {dst} (also a later source)")
                out.append(Insn("vmov", pdst, (psrcs[0],), width=i.width, comment="2-operand copy"))
                psrcs = [pdst] + psrcs[1:]
            out.append(Insn(i.op, pdst, tuple(psrcs), imm=i.imm, width=i.width, mask=i.mask,
                            mask_elem=i.mask_elem, comment=i.comment))
        return out


def allocate_path(items: list, *, nregs: int, legacy: bool, key_base: str | None, key_stride: int,
                  width: int, what: str, key_disp: int = 0, key_aligned: bool = True) -> Allocation:
    """`key_base` + `key_disp`: round key 0 (aligned to `width` when `key_aligned`)."""
    pinned_ids: dict[int, VReg] = {}
    keys: set[int] = set()
    for it in items:
        if isinstance(it, Insn):
            for o in (it.dst, *it.srcs):
                if isinstance(o, VReg) and o.pinned:
                    pinned_ids[o.id] = o
                elif isinstance(o, KeyRef):
                    keys.add(o.index)
    top = nregs - 1
    pinned = {}
    for vid in sorted(pinned_ids):
        pinned[vid] = top
        top -= 1
    order = sorted(keys)
    regions = _regions(items)
    last_error = ""
    for nkeys in range(len(order), -1, -1):
        if top + 1 - nkeys < 0:
            continue
        key_regs = {k: top - n for n, k in enumerate(order[:nkeys])}
        scan = _Scan(nregs, legacy, key_base or "", key_stride, key_regs, pinned, key_disp)
        try:
            allocated = [scan.region(r) for r in regions]
        except RegisterPressure as e:
            last_error = str(e)
            continue
        out: list = []
        seps = [it for it in items if _splits(it)]
        for n, reg in enumerate(allocated):
            out.extend(reg)
            if n < len(seps):
                out.append(seps[n])
        loads = [Insn("vload_key" if key_aligned else "vload", Phys(r, f"KEY{k}"),
                      (Mem(key_base or "", key_disp + k * key_stride),), width=width,
                      comment=f"round key {k} stays in a register")
                 for k, r in sorted(key_regs.items())]
        # Keys are loaded right after the path's entry label.
        at = 1 if out and isinstance(out[0], Label) else 0
        used = scan.high_water + len(pinned) + len(key_regs)
        return Allocation(out[:at] + loads + out[at:], key_regs,
                          [k for k in order if k not in key_regs], used)
    raise RegisterPressure(f"{what} needs more than the {nregs} vector registers "
                           f"({last_error}); use a smaller --depth")
