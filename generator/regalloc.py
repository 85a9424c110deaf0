"""Register allocation: virtual vector registers onto xmm/ymm/zmm 0..R-1.

Per path (one per AES key size): pinned registers (loop-carried state) get a
register for the whole path; round keys get registers while they fit. A key
that does not fit is loaded into a temporary once per run of uses (one round
of all the interleaved groups) and shared by them: D memory operands would cost
D loads per round, which at two vaesenc per cycle saturates the load ports of a
16-register core (Zen 3, two loads per cycle); a key used once in a run stays a
memory operand (the same one load, no register). Temporaries, which never cross
a label, are allocated by a linear scan of each straight-line region (optimal
for straight-line code: the register count is the maximum number live).
Legacy SSE ties the destination to the first source; when that source stays
live a copy is inserted. A path that cannot fit raises `RegisterPressure`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import ops
from .ir import BuildError, Branch, Insn, KeyRef, Label, Mark, Mem, Phys, VReg, pinned_vregs


class RegisterPressure(BuildError):
    pass


@dataclass
class Allocation:
    insns: list  # Insn (operands Phys / Mem / ...), Label, Branch, Mark
    key_regs: dict[int, int] = field(default_factory=dict)
    spilled_keys: list[int] = field(default_factory=list)
    registers_used: int = 0
    shared_key_loads: bool = False  # spilled keys: one load per run into a shared register (else operands)


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
        self.high_water = 0  # registers in use after an instruction (the count reported)
        self.demand = 0  # registers in use at any moment, a tied copy's destination included

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

    def region(self, insns: list[Insn], emit: bool = True) -> list[Insn]:
        """Allocate one straight-line region. With emit=False nothing is written and the file is
        unbounded: only `demand` is kept, the most registers in use at any one time."""
        last_use: dict[int, int] = {}
        for n, i in enumerate(insns):
            for s in getattr(i, "srcs", ()):
                if isinstance(s, VReg) and not s.pinned:
                    last_use[s.id] = n
        free = list(reversed(self.pool))  # pop() hands out low numbers first (VEX-encodable)
        beyond = 0  # registers handed out past the pool (emit=False only)

        def take() -> int:
            nonlocal beyond
            if not free:
                if emit:
                    raise RegisterPressure("out of vector registers")
                beyond += 1
                free.append(-beyond)
            r = free.pop()
            self.demand = max(self.demand, len(self.pool) + beyond - len(free))
            return r

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
                    where[dst.id] = take()
                    copy_from = srcs[0]
                    for s in dying:
                        free.append(where[s.id])
                else:
                    for s in dying:
                        free.append(where[s.id])
                    where[dst.id] = take()
            else:
                for s in dying:
                    free.append(where[s.id])
                if tied and isinstance(dst, VReg) and srcs[0] is not dst:
                    copy_from = srcs[0]
            in_use = len(self.pool) + beyond - len(free)
            self.high_water = max(self.high_water, in_use)
            if not emit:
                continue
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


def _share_spilled_keys(region: list, spilled: set[int], next_id: int, load: str, key_base: str,
                        key_disp: int, key_stride: int) -> tuple[list, int]:
    """Replace the spilled keys of each run (uses of one key, at one width, with no other round key
    read between them) by one load into a fresh temporary, placed before the run's first use."""
    runs: list[tuple[int, list[int]]] = []  # (key, positions of its uses in the run)
    open_run: dict[int, tuple[int, list[int]]] = {}  # key -> (width, positions) of its run still open
    for n, it in enumerate(region):
        used = {s.index for s in getattr(it, "srcs", ()) if isinstance(s, KeyRef)}
        if used:
            open_run = {k: r for k, r in open_run.items() if k in used}  # another key read: runs end
        for k in sorted(used & spilled):
            if k not in open_run or open_run[k][0] != it.width:
                open_run[k] = (it.width, [])
                runs.append((k, open_run[k][1]))
            open_run[k][1].append(n)
    temps: dict[int, dict[int, VReg]] = {}  # position -> key -> the run's temporary
    loads: dict[int, list[Insn]] = {}  # position of a run's first use -> its load
    for k, run in runs:
        if len(run) < 2:
            continue  # one use: a memory operand costs the same load and no register
        reg = VReg(next_id, f"KEY{k}_")
        next_id += 1
        loads.setdefault(run[0], []).append(Insn(load, reg, (Mem(key_base, key_disp + k * key_stride),),
                                                 width=region[run[0]].width, comment=f"round key {k}"))
        for n in run:
            temps.setdefault(n, {})[k] = reg
    if not loads:
        return region, next_id
    out: list = []
    for n, it in enumerate(region):
        out.extend(loads.get(n, ()))
        if n in temps:
            regs = temps[n]
            it = replace(it, srcs=tuple(regs.get(s.index, s) if isinstance(s, KeyRef) else s for s in it.srcs))
        out.append(it)
    return out, next_id


def allocate_path(items: list, *, nregs: int, legacy: bool, key_base: str | None, key_stride: int,
                  width: int, what: str, key_disp: int = 0, key_aligned: bool = True,
                  emit: bool = True) -> Allocation:
    """`key_base` + `key_disp`: round key 0 (aligned to `width` when `key_aligned`). With emit=False
    only whether and how the path fits is worked out (its `insns` stay empty): depth searches."""
    pinned_ids = pinned_vregs(items)
    keys = {o.index for it in items if isinstance(it, Insn) for o in (it.dst, *it.srcs) if isinstance(o, KeyRef)}
    top = nregs - 1
    pinned = {}
    for vid in sorted(pinned_ids):
        pinned[vid] = top
        top -= 1
    order = sorted(keys)
    regions = _regions(items)
    first_id = 1 + max((o.id for it in items if isinstance(it, Insn) for o in (it.dst, *it.srcs)
                        if isinstance(o, VReg)), default=0)
    load = "vload_key" if key_aligned else "vload"
    keys_read = [frozenset(s.index for it in r for s in getattr(it, "srcs", ()) if isinstance(s, KeyRef))
                 for r in regions]
    shared_cache: dict[tuple[int, frozenset[int]], list] = {}
    demand_cache: dict[tuple[int, frozenset[int]], tuple[int, int]] = {}  # -> (demand, high water)

    def shared(n: int, spilled: frozenset[int]) -> list:
        """Region n with each run of a spilled key reading one shared load. Temporaries never
        cross a region, so each region numbers its own from first_id."""
        k = (n, spilled & keys_read[n])
        if not k[1]:
            return regions[n]
        if k not in shared_cache:
            shared_cache[k] = _share_spilled_keys(regions[n], k[1], first_id, load, key_base or "", key_disp,
                                                  key_stride)[0]
        return shared_cache[k]

    def demand(n: int, spilled: frozenset[int]) -> tuple[int, int]:
        """The most temporaries region n holds at once (it fits iff the registers left cover it),
        and the most after any one instruction (the count reported)."""
        k = (n, spilled & keys_read[n])
        if k not in demand_cache:
            scan = _Scan(0, legacy, "", key_stride, {}, {})
            scan.region(shared(n, spilled), emit=False)
            demand_cache[k] = scan.demand, scan.high_water
        return demand_cache[k]

    def key_registers(nkeys: int) -> dict[int, int]:
        return {k: top - n for n, k in enumerate(order[:nkeys])}

    def spilled_keys(share: bool, nkeys: int) -> frozenset[int]:
        return frozenset(order[nkeys:]) if share else frozenset()

    def fits(share: bool, nkeys: int) -> bool:
        free = max(0, nregs - len(pinned) - nkeys)  # pinned values at the top, then the keys kept
        spilled = spilled_keys(share, nkeys)
        return all(demand(n, spilled)[0] <= free for n in range(len(regions)))

    def allocation(share: bool, nkeys: int) -> Allocation:
        key_regs = key_registers(nkeys)
        spilled = spilled_keys(share, nkeys)
        shared_loads = share and nkeys < len(order)
        if not emit:
            used = max((demand(n, spilled)[1] for n in range(len(regions))), default=0)
            return Allocation([], key_regs, [k for k in order if k not in key_regs], used + len(pinned) + len(key_regs),
                              shared_key_loads=shared_loads)
        scan = _Scan(nregs, legacy, key_base or "", key_stride, key_regs, pinned, key_disp)
        allocated = [scan.region(shared(n, spilled)) for n in range(len(regions))]
        out: list = []
        seps = [it for it in items if _splits(it)]
        for n, reg in enumerate(allocated):
            out.extend(reg)
            if n < len(seps):
                out.append(seps[n])
        loads = [Insn(load, Phys(r, f"KEY{k}"),
                      (Mem(key_base or "", key_disp + k * key_stride),), width=width,
                      comment=f"round key {k} stays in a register")
                 for k, r in sorted(key_regs.items())]
        # Keys are loaded right after the path's entry label.
        at = 1 if out and isinstance(out[0], Label) else 0
        used = scan.high_water + len(pinned) + len(key_regs)
        return Allocation(out[:at] + loads + out[at:], key_regs,
                          [k for k in order if k not in key_regs], used, shared_key_loads=shared_loads)

    # Shared key loads first, keeping as many keys in registers as fit beside their temporary;
    # a path too tight even for that gets its spilled keys as memory operands (no register).
    # Fitting is monotone in the keys kept: a key given up frees a register the whole path held,
    # and its shared temporary lives only through its runs. So the most that fit is bisected,
    # on each region's demand (cached per spilled keys it reads); only the winner is allocated.
    most = min(len(order), top + 1)
    if emit:
        try:  # every key in a register, the usual case on 32 registers: allocated straight away
            return allocation(True, most)
        except RegisterPressure:
            pass
    for share in (True, False):
        best = most if fits(share, most) else None
        lo, hi = (0, most - 1) if best is None else (1, 0)
        while lo <= hi:
            mid = (lo + hi) // 2
            if fits(share, mid):
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        if best is not None:
            try:
                return allocation(share, best)
            except RegisterPressure as e:
                raise BuildError(f"internal: {what} fits by count but not when allocated ({e})") from e
    raise RegisterPressure(f"{what} needs more than the {nregs} vector registers; use a smaller --depth")
