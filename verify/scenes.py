"""Every family's call scenes, by C function: what the ABI, guard-page and simulator checks replay.

Each family's check module describes its functions' realistic uses in a `SCENES` table
(harness/scene.py says what a scene is); the block-cipher modes and key setups of the
block-mode files need none (abi.py and guard.py call them directly).
"""
from __future__ import annotations

from aesgen.verify import gcm, gcmsiv, halfgates, mpc, ocb, otr, wideblock, xts
from aesgen.verify.harness.scene import SceneFn

SCENES: dict[str, SceneFn] = {
    **gcm.SCENES, **gcmsiv.SCENES, **xts.SCENES, **ocb.SCENES, **otr.SCENES, **wideblock.SCENES,
    **mpc.SCENES, **halfgates.SCENES,
}


def scene_for(fn: str) -> SceneFn | None:
    return SCENES.get(fn)
