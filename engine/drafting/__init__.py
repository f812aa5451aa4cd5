"""The engine's drafters, one per scheme (DESIGN.md §6), each a `sim.scheduler.Planner`:
`ngram` (engine/ngram.py), `draft`, `medusa`, `eagle`, `eagle2`, `mtp` (this package)."""
from __future__ import annotations

from engine.drafting.base import DraftContext, DraftPlan
from engine.drafting.draft_model import DraftModelDrafter
from engine.drafting.eagle import EagleDrafter
from engine.drafting.heads import Drafters
from engine.drafting.medusa import MedusaDrafter
from engine.drafting.mtp import MTPDrafter
from engine.ngram import NGramPlanner

SCHEMES = ("none", "ngram", "draft", "medusa", "eagle", "eagle2", "mtp")

__all__ = ["SCHEMES", "DraftContext", "DraftPlan", "make_drafter"]


def make_drafter(scheme, ctx: DraftContext, drafters: Drafters | None):
    """The scheme's planner (None for `none`)."""
    name = scheme.name
    if name == "none":
        return None
    if name == "ngram":
        return NGramPlanner(scheme, ctx.tokens, ctx.trace)
    need = {"draft": "draft", "medusa": "medusa", "eagle": "eagle", "eagle2": "eagle", "mtp": "mtp"}[name]
    have = getattr(drafters, need, None) if drafters is not None else None
    if not have:
        raise ValueError(f"scheme {name!r} needs the model's {need} drafter, which it does not have")
    if name == "draft":
        return DraftModelDrafter(scheme, ctx, have)
    if name == "medusa":
        return MedusaDrafter(scheme, ctx, have)
    if name in ("eagle", "eagle2"):
        return EagleDrafter(scheme, ctx, have, dynamic=name == "eagle2")
    return MTPDrafter(scheme, ctx, have)
