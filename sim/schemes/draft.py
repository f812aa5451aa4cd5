"""`draft`: an independent small draft model drafts K tokens autoregressively; the target
verifies the chain of K+1 (Leviathan et al. 2023; Chen et al. 2023)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.models import ModelSpec, model_from_node, preset_names
from sim.schemes.base import ModelDraftScheme, need_rank_acceptance, parse_common
from sim.specio import Node


@dataclass(frozen=True)
class DraftModel(ModelDraftScheme):
    name = "draft"
    draft_model: ModelSpec | None = None

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec, base_dir: Path) -> "DraftModel":
        f, common = parse_common(cls, node, ("draft_model",), "k", base_dir)
        if "draft_model" in f:
            draft = model_from_node(f["draft_model"], base_dir)
        elif f"{model.name}-draft" in preset_names():  # a trained family's own draft model
            draft = model_from_node(Node(f"{model.name}-draft", node.file, f"{node.path}.draft_model"), base_dir)
        else:
            raise node.error("missing required key 'draft_model' (a model preset, path or mapping; "
                             "only a trained family such as `tiny` has a default)")
        if draft.params_total >= model.params_total:
            raise f["draft_model"].error(
                f"a draft model must be smaller than its target: {draft.name} has {draft.params_total / 1e9:.2f}B "
                f"parameters, the target {model.name} {model.params_total / 1e9:.2f}B")
        if draft.vocab != model.vocab:
            raise f["draft_model"].error(f"draft vocabulary {draft.vocab} differs from the target's {model.vocab}")
        scheme = cls(draft_model=draft, **common)
        need_rank_acceptance(scheme, "a draft-model chain")
        return scheme

    def params(self) -> dict:
        return {**super().params(), "draft_model": self.draft_model.name}

    def drafter_spec(self):
        return self.draft_model, False

    def passes(self, n, depth, tree, fresh, first, several):
        """Pass 1 feeds the committed tokens not yet seen and the last sampled one (logits at the
        last of each: every sequence has several rows); then one token per pass
        (engine/drafting/draft_model.py)."""
        return [(fresh + n, 2 * n, n)] + [n] * (depth - 1)
