"""SparseML-style YAML recipes: write one from an optimization record, read one back.

Format (SparseML 1.x recipe, keys as SparseML names them)::

    version: 1.1.0
    modifiers:
    - !EpochRangeModifier {start_epoch, end_epoch}
    - !SetLearningRateModifier {start_epoch, learning_rate}
    - !LearningRateModifier {start_epoch, end_epoch, lr_class: StepLR|MultiStepLR|ExponentialLR,
                             lr_kwargs: {step_size|milestones, gamma}, init_lr, update_frequency: -1}
    - the structure's pruning modifiers; channel (structures/channel.py): !StructuredPruningModifier per distinct
      ratio + !LayerThinningModifier; unstructured (structures/unstructured.py):
      !GMPruningModifier {params: [weight initializer names], init_sparsity, final_sparsity, start_epoch,
                          end_epoch, update_frequency, inter_func: cubic, mask_type: unstructured,
                          leave_enabled: true}          # one per distinct final sparsity
    - !QuantizationModifier {start_epoch, disable_quantization_observer_epoch, freeze_bn_stats_epoch,
                             ignore: [module names kept FP32]}   # only when quantization is on

Written with PyYAML through :class:`RecipeDumper` (a SafeDumper with a representer for :class:`Modifier`),
read with :class:`RecipeLoader` (a SafeLoader with a multi-constructor for every ``!Tag``), so no Python
object is ever constructed from a file.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

import yaml

from sparsify_tui.optimization.modifiers import (  # noqa: F401 - the recipe's vocabulary, re-exported
    Modifier, anonymous_names, module_name, pruned_weight_names, recipe_float, recipe_warnings,
)
from sparsify_tui.optimization.record import Optimization
from sparsify_tui.optimization.schedule import LR_CLASS
from sparsify_tui.optimization.structures import structure_of

RECIPE_VERSION = "1.1.0"


class RecipeDumper(yaml.SafeDumper):
    """SafeDumper that writes :class:`Modifier` as ``!Tag`` mappings, keeping field order."""


def _represent_modifier(dumper: yaml.SafeDumper, mod: Modifier):
    return dumper.represent_mapping("!" + mod.tag, list(mod.fields.items()))


RecipeDumper.add_representer(Modifier, _represent_modifier)


class RecipeLoader(yaml.SafeLoader):
    """SafeLoader that reads any ``!Tag`` mapping as ``{"type": "Tag", ...fields}``."""


def _construct_tagged(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node):
    if isinstance(node, yaml.MappingNode):
        data = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        data = {"items": loader.construct_sequence(node, deep=True)}
    else:
        data = {"value": loader.construct_scalar(node)}
    return {"type": tag_suffix, **data}


RecipeLoader.add_multi_constructor("!", _construct_tagged)


def build_modifiers(rec: Optimization) -> List[Modifier]:
    """The recipe's modifiers for an optimization, in epoch order (see the module docstring): the epoch range,
    the LR modifiers, the structure's pruning modifiers
    (:meth:`~sparsify_tui.optimization.structures.PruningStructure.recipe_modifiers`), the quantization one."""
    ep = rec.epochs
    total = recipe_float(ep.total_epochs)
    mods: List[Modifier] = [Modifier("EpochRangeModifier", {"start_epoch": 0.0, "end_epoch": total})]
    for m in sorted(rec.lr_modifiers, key=lambda m: float(m.get("start_epoch", 0))):
        if m["type"] == "set":
            mods.append(Modifier("SetLearningRateModifier", {
                "start_epoch": recipe_float(m.get("start_epoch", 0.0)),
                "learning_rate": recipe_float(m["learning_rate"])}))
            continue
        kwargs: Dict[str, Any] = {}
        if m["type"] == "step":
            kwargs["step_size"] = recipe_float(m["step_size"])
        elif m["type"] == "multistep":
            kwargs["milestones"] = [recipe_float(x) for x in m.get("milestones", [])]
        kwargs["gamma"] = recipe_float(m["gamma"])
        end = float(m.get("end_epoch", -1.0))
        mods.append(Modifier("LearningRateModifier", {
            "start_epoch": recipe_float(m.get("start_epoch", 0.0)),
            "end_epoch": recipe_float(end if end >= 0 else total),
            "lr_class": LR_CLASS[m["type"]], "lr_kwargs": kwargs, "init_lr": recipe_float(m["init_lr"]),
            "update_frequency": -1.0,
        }))
    mods.extend(structure_of(rec).recipe_modifiers(rec))
    q = rec.quantization
    if q.enabled:
        by_node = {l.node_id: l.weight_name for l in rec.layers}
        fields: Dict[str, Any] = {
            "start_epoch": recipe_float(ep.pruning_end_epoch if q.start_epoch is None else q.start_epoch),
            "disable_quantization_observer_epoch": recipe_float(
                ep.total_epochs if q.disable_quantization_observer_epoch is None
                else q.disable_quantization_observer_epoch),
            "freeze_bn_stats_epoch": recipe_float(ep.total_epochs if q.freeze_bn_stats_epoch is None
                                                  else q.freeze_bn_stats_epoch),
        }
        ignore = [module_name(by_node.get(n, n)) for n in q.excluded or []]
        if ignore:
            fields["ignore"] = ignore
        mods.append(Modifier("QuantizationModifier", fields))
    return mods


def to_yaml(rec: Optimization, *, project_name: str = "") -> str:
    """The recipe text for an optimization: comment header, then ``version`` and ``modifiers``."""
    lines = [
        f"# SparseML recipe generated by sparsify-tui: optimization {rec.name!r}"
        + (f" of project {project_name!r}" if project_name else ""),
        "# " + structure_of(rec).recipe_summary(rec),
        f"# profiles: perf {rec.perf_profile_name}, loss {rec.loss_profile_name}",
        "# params are ONNX weight initializer names; in PyTorch they must equal model.named_parameters() names.",
    ]
    for w in recipe_warnings(rec):
        lines.append("# WARNING: " + w)
    body = yaml.dump({"version": RECIPE_VERSION, "modifiers": build_modifiers(rec)}, Dumper=RecipeDumper,
                     sort_keys=False, default_flow_style=False, width=100)
    return "\n".join(lines) + "\n" + body


def _front_matter(text: str) -> str:
    stripped = text.lstrip()
    if stripped.startswith("---"):
        parts = re.split(r"^---\s*$", stripped, flags=re.M)
        if len(parts) >= 3:
            return parts[1]
    return text


def parse_recipe(text: str) -> Dict[str, Any]:
    """Read a recipe (plain YAML or a markdown file with a ``---`` YAML front matter).

    Returns ``{"version", "modifiers": [{"type": "GMPruningModifier", ...}], "sparsities":
    {param: final_sparsity}}`` (structured modifiers: the fraction of filters of each param). Modifiers come
    from ``modifiers`` and every top-level ``*_modifiers`` list.
    Raises ``ValueError`` for text that is not a recipe.
    """
    try:
        data = yaml.load(_front_matter(text), Loader=RecipeLoader)
    except yaml.YAMLError as err:
        raise ValueError(f"not a YAML recipe: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ValueError("not a recipe: the YAML top level is not a mapping")
    mods: List[Dict[str, Any]] = []
    for key, value in data.items():
        if (key == "modifiers" or str(key).endswith("_modifiers")) and isinstance(value, list):
            mods.extend(m for m in value if isinstance(m, dict) and "type" in m)
    sparsities: Dict[str, float] = {}
    for m in mods:
        if m["type"] in ("GMPruningModifier", "MagnitudePruningModifier", "ConstantPruningModifier",
                         "StructuredPruningModifier") \
                and isinstance(m.get("params"), list) and "final_sparsity" in m:
            for p in m["params"]:
                sparsities[str(p)] = float(m["final_sparsity"])
    return {"version": data.get("version"), "modifiers": mods, "sparsities": sparsities}
