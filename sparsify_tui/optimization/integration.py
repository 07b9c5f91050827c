"""Integration code generated from an optimization: PyTorch+SparseML, plain PyTorch, Keras, TensorFlow.

Every variant embeds the same per-layer sparsities and schedule as the recipe:

* ``pytorch`` (SparseML 1.x): ``ScheduledModifierManager.from_yaml(recipe)`` + ``ScheduledOptimizer`` (or
  ``manager.modify``), ``manager.finalize``.
* ``pytorch-plain``: no SparseML (it is end-of-life). ``torch.nn.utils.prune.custom_from_mask`` masks
  recomputed by weight magnitude at each GMP update step, with the cubic schedule
  ``s_t = s_f + (s_i - s_f)(1 - (t - t0)/(n*dt))**3`` and the same LR schedule; ONNX weight names map to
  module names by stripping ``.weight``, with a fallback matching prunable modules by order and shape.
  torch is imported inside the functions, so the schedule functions run (and are tested) without torch.
* ``keras``: tensorflow_model_optimization ``prune_low_magnitude`` with ``PolynomialDecay(power=3)`` (the
  same cubic GMP) per layer, plus a ``LearningRateScheduler``.
* ``tensorflow``: a custom training loop helper that masks ``tf.Variable`` kernels by magnitude on the same
  schedule (no tfmot).

The header comment warns when weight names look anonymous (``onnx::Conv_123``).
"""

from __future__ import annotations

import json
import textwrap
from typing import List

from sparsify_tui.optimization.modifiers import module_name, recipe_warnings
from sparsify_tui.optimization.record import Optimization

FRAMEWORKS = {
    "pytorch": "PyTorch + SparseML",
    "pytorch-plain": "plain PyTorch (no SparseML)",
    "keras": "Keras (tensorflow_model_optimization)",
    "tensorflow": "TensorFlow (custom loop)",
}


def schedule_constants(rec: Optimization) -> List[str]:
    """Lines of the generated constants of the recipe's schedule (epochs, floats): ``START_EPOCH``, ``END_EPOCH``,
    ``UPDATE_FREQUENCY``, ``INIT_SPARSITY`` (0..1), ``TOTAL_EPOCHS`` and ``LR_MODIFIERS``, which
    :func:`schedule_functions_source` reads; shared by every generated variant that schedules by itself."""
    ep = rec.epochs
    consts = {
        "START_EPOCH": float(ep.pruning_start_epoch), "END_EPOCH": float(ep.pruning_end_epoch),
        "UPDATE_FREQUENCY": float(ep.update_frequency), "INIT_SPARSITY": float(ep.init_sparsity),
        "TOTAL_EPOCHS": float(ep.total_epochs),
    }
    lines = [f"{k} = {v!r}" for k, v in consts.items()]
    lines.append("# learning-rate modifiers (epochs; same as the recipe)")
    lines.append("LR_MODIFIERS = " + json.dumps(rec.lr_modifiers, indent=4))
    return lines


def _schedule_source(rec: Optimization) -> str:
    """Pure-Python constants + schedule functions shared by the plain PyTorch and TF variants."""
    layers = [{"weight": l.weight_name, "module": module_name(l.weight_name), "op_type": l.op_type,
               "shape": l.weight_shape, "sparsity": round(float(l.sparsity), 4)}
              for l in rec.layers if float(l.sparsity or 0) > 0]
    lines = schedule_constants(rec)
    lines.append("# per-layer final sparsity: ONNX weight name, module name guess, op type, weight shape")
    lines.append("LAYERS = " + json.dumps(layers, indent=4))
    return "\n".join(lines) + "\n\n" + schedule_functions_source()


def schedule_functions_source() -> str:
    """Source of ``sparsity_at(epoch, final_sparsity, ...)`` (the GMP cubic schedule) and ``lr_at(epoch,
    default_lr)`` (the LR modifiers), reading the constants ``INIT_SPARSITY``, ``START_EPOCH``, ``END_EPOCH``,
    ``UPDATE_FREQUENCY`` and ``LR_MODIFIERS`` of the generated file; shared by every generated variant."""
    return textwrap.dedent('''
    import math


    def sparsity_at(epoch, final_sparsity, init_sparsity=INIT_SPARSITY, start_epoch=START_EPOCH,
                    end_epoch=END_EPOCH, update_frequency=UPDATE_FREQUENCY):
        """GMP cubic sparsity at a float epoch, updated every update_frequency epochs:
        s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (n * dt)) ** 3; 0 before start, s_f from end_epoch on."""
        init_sparsity = min(init_sparsity, final_sparsity)
        if epoch < start_epoch:
            return 0.0
        span = end_epoch - start_epoch
        if span <= 0 or epoch >= end_epoch:
            return final_sparsity
        dt = update_frequency if update_frequency > 0 else span
        t = start_epoch + math.floor((epoch - start_epoch) / dt + 1e-9) * dt
        frac = min(1.0, max(0.0, (t - start_epoch) / span))
        return final_sparsity + (init_sparsity - final_sparsity) * (1.0 - frac) ** 3


    def lr_at(epoch, default_lr=None):
        """Learning rate at a float epoch under LR_MODIFIERS (set / step / multistep / exponential)."""
        lr = default_lr
        for mod in sorted(LR_MODIFIERS, key=lambda m: m.get("start_epoch", 0.0)):
            start = mod.get("start_epoch", 0.0)
            if epoch < start:
                continue
            if mod["type"] == "set":
                lr = mod["learning_rate"]
                continue
            end = mod.get("end_epoch", -1.0)
            e = epoch if end < 0 or epoch < end else end
            if mod["type"] == "step":
                lr = mod["init_lr"] * mod["gamma"] ** math.floor((e - start) / mod["step_size"] + 1e-9)
            elif mod["type"] == "multistep":
                lr = mod["init_lr"] * mod["gamma"] ** sum(1 for m in mod["milestones"] if m <= e)
            else:
                lr = mod["init_lr"] * mod["gamma"] ** math.floor(e - start + 1e-9)
        return lr
    ''').lstrip("\n")


def _header(rec: Optimization, framework: str, recipe_path: str) -> str:
    avg = rec.estimates.avg_sparsity if rec.estimates is not None else None
    lines = [
        f"# {FRAMEWORKS[framework]} integration generated by sparsify-tui",
        f"# optimization {rec.name!r}: {sum(1 for l in rec.layers if l.sparsity)} pruned "
        f"layers, average sparsity {avg or 0:.3f}, {rec.epochs.total_epochs} epochs",
        f"# recipe: {recipe_path}",
        "# Weight names come from the ONNX model; they must match your training model's parameter names.",
    ]
    for w in recipe_warnings(rec):
        lines.append("# WARNING: " + w)
    return "\n".join(lines) + "\n"


def sparseml_source(recipe_path: str, *, notes: List[str], trains: str, modifiers: str,
                    newer_api_note: bool = False) -> str:
    """The generated SparseML 1.x driver: ``train()`` runs the recipe at ``recipe_path`` through
    ``ScheduledModifierManager`` + ``ScheduledOptimizer``. ``notes``: comment lines after the install line;
    ``trains``: what the recipe does (the docstring); ``modifiers``: what ``optimizer.step()`` also steps;
    ``newer_api_note``: mention ``manager.modify`` of newer SparseML 1.x. Shared by every structure."""
    lines = [
        "",
        '# pip install "sparseml[torch]<2"   (SparseML 1.x; it is end-of-life: see the plain-PyTorch variant)',
        *notes,
        "import torch",
        "from sparseml.pytorch.optim import ScheduledModifierManager, ScheduledOptimizer",
        "",
        f"RECIPE_PATH = {recipe_path!r}",
        "",
        "",
        'def train(model, optimizer, train_loader, loss_fn, device="cpu"):',
        f'    """Train `model` with the recipe: {trains}."""',
        "    manager = ScheduledModifierManager.from_yaml(RECIPE_PATH)",
        "    optimizer = ScheduledOptimizer(optimizer, model, manager, steps_per_epoch=len(train_loader))",
        *(["    # (newer SparseML 1.x: optimizer = manager.modify(model, optimizer, steps_per_epoch=len(train_loader)))"]
          if newer_api_note else []),
        "    model.to(device)",
        "    for epoch in range(manager.max_epochs):",
        "        model.train()",
        "        for inputs, labels in train_loader:",
        "            inputs, labels = inputs.to(device), labels.to(device)",
        "            optimizer.zero_grad()",
        "            loss = loss_fn(model(inputs), labels)",
        "            loss.backward()",
        f"            optimizer.step()  # also steps the {modifiers} modifiers",
        "    manager.finalize(model)",
        "    return model",
        "",
    ]
    return "\n".join(lines)


def _pytorch_sparseml(rec: Optimization, recipe_path: str) -> str:
    return _header(rec, "pytorch", recipe_path) + sparseml_source(
        recipe_path, notes=[], trains="pruning (GMP), LR schedule and QAT as configured",
        modifiers="pruning / LR / quantization", newer_api_note=True)


_PLAIN_USAGE = textwrap.dedent('''
    # Plain PyTorch implementation of the recipe, without SparseML (end-of-life).
    # Usage:
    #     pruner = GMPPruner(model)            # maps LAYERS to modules (by name, else by order and shape)
    #     for epoch in range(int(math.ceil(TOTAL_EPOCHS))):
    #         for step, (x, y) in enumerate(loader):
    #             e = epoch + step / len(loader)
    #             set_lr(optimizer, e)
    #             pruner.step(e)               # updates masks at each GMP step
    #             ... forward / backward / optimizer.step() ...
    #     pruner.finalize()                    # makes the zeros permanent (prune.remove)
    # or simply: train(model, optimizer, loader, loss_fn)
    # Quantization-aware training is not part of this variant: quantize the exported ONNX model with
    # `sparsify-tui apply PROJECT OPTIMIZATION` (INT8 when the optimization quantizes: made with
    # `sparsify-tui optimize ... --quantize`, or Quant on in the TUI) or with onnxruntime.quantization.


''')
"""The generated plain-PyTorch module: its usage comment."""

SET_LR_SOURCE = textwrap.dedent('''\
    def set_lr(optimizer, epoch):
        """Set every param group's LR to lr_at(epoch) (keeps the optimizer's own LR before any modifier)."""
        for group in optimizer.param_groups:
            lr = lr_at(epoch, default_lr=group["lr"])
            if lr is not None:
                group["lr"] = lr


''')
"""The generated ``set_lr`` (the recipe's LR schedule on an optimizer), shared by every plain-PyTorch module."""

_PLAIN_MODULES = SET_LR_SOURCE + textwrap.dedent('''\
    def _prunable_modules(model):
        import torch
        kinds = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear,
                 torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)
        return [(name, m) for name, m in model.named_modules() if isinstance(m, kinds)]


    def resolve_modules(model, verbose=True):
        """[(module, final_sparsity, onnx_weight_name)] for LAYERS. Matches ONNX weight names to module names by
        stripping ".weight"; when names do not match (anonymous exporter names like onnx::Conv_123), falls back
        to the order of prunable modules in the ONNX graph vs model.named_modules() with an equal (or
        transposed) weight shape. Prints the mapping; raises ValueError if a layer cannot be mapped."""
        modules = dict(model.named_modules())
        out, unmatched = [], []
        for layer in LAYERS:
            m = modules.get(layer["module"])
            if m is not None and getattr(m, "weight", None) is not None:
                out.append((m, layer["sparsity"], layer["weight"]))
            else:
                unmatched.append(layer)
        if unmatched:
            used = {id(m) for m, _, _ in out}
            candidates = [(n, m) for n, m in _prunable_modules(model) if id(m) not in used]
            for layer in unmatched:
                shape = layer.get("shape")
                for k, (name, m) in enumerate(candidates):
                    w = tuple(m.weight.shape)
                    if shape is None or w == tuple(shape) or w == tuple(reversed(shape)):
                        out.append((m, layer["sparsity"], layer["weight"]))
                        if verbose:
                            print(f"mapped ONNX weight {layer['weight']!r} -> module {name!r} (by order/shape)")
                        del candidates[: k + 1]
                        break
                else:
                    raise ValueError(f"no module for ONNX weight {layer['weight']!r} (shape {shape}); "
                                     "edit LAYERS[...]['module'] to your module name")
        return out


''')
"""LR setting and the mapping of ONNX weights to torch modules."""

_PLAIN_PRUNER = textwrap.dedent('''\
    def _effective_weight(module):
        """The weight as the next forward sees it (weight_orig * weight_mask once pruned)."""
        if hasattr(module, "weight_orig") and hasattr(module, "weight_mask"):
            return module.weight_orig * module.weight_mask
        return module.weight


    class GMPPruner:
        """Gradual magnitude pruning with torch.nn.utils.prune masks on the recipe's cubic schedule."""

        def __init__(self, model, verbose=True):
            self.layers = resolve_modules(model, verbose=verbose)
            self.current = {}

        def step(self, epoch):
            """Update masks if the scheduled sparsity changed (call every batch with a float epoch)."""
            import torch
            import torch.nn.utils.prune as prune
            for module, final, name in self.layers:
                target = sparsity_at(epoch, final)
                if target <= 0 or self.current.get(name) == target:
                    continue
                with torch.no_grad():
                    weight = _effective_weight(module)
                    k = int(round(target * weight.numel()))
                    mask = torch.ones_like(weight)
                    if k > 0:
                        idx = torch.argsort(weight.detach().abs().flatten(), stable=True)[:k]
                        mask.view(-1)[idx] = 0
                    if prune.is_pruned(module) and hasattr(module, "weight_mask"):
                        module.weight_mask.copy_(mask)
                    else:
                        prune.custom_from_mask(module, "weight", mask)
                self.current[name] = target

        def sparsities(self):
            """{onnx weight name: fraction of zero weights now}."""
            return {name: float((_effective_weight(module) == 0).float().mean()) for module, _, name in self.layers}

        def finalize(self):
            """Make the pruning permanent (removes the masks, keeps the zeros)."""
            import torch.nn.utils.prune as prune
            for module, _, _ in self.layers:
                if prune.is_pruned(module) and hasattr(module, "weight_mask"):
                    prune.remove(module, "weight")


''')
"""The gradual magnitude pruner (torch.nn.utils.prune masks on the cubic schedule)."""

def plain_train_source(*, params: str, doc: str, setup: List[str], step: str, finish: List[str]) -> str:
    """The generated plain-PyTorch ``train(model, optimizer, train_loader, loss_fn, <params>device="cpu",
    epochs=None)``: ``TOTAL_EPOCHS`` (or ``epochs``) epochs, each batch at a float epoch setting the recipe's LR
    (``set_lr``) and stepping the structure's pruner before the optimizer step; returns the model. The structure
    plugs in its lines: ``params`` (extra parameters, each with its ", "), ``doc`` (the docstring), ``setup``
    (statements before the loop: make the pruner, move the model), ``step`` (the pruner's statement in the loop,
    ``e`` the float epoch) and ``finish`` (statements after it). Shared by every structure."""
    lines = [
        f'def train(model, optimizer, train_loader, loss_fn, {params}device="cpu", epochs=None):',
        f'    """{doc}"""',
        *("    " + s for s in setup),
        "    n_epochs = int(math.ceil(TOTAL_EPOCHS if epochs is None else epochs))",
        "    steps = max(1, len(train_loader))",
        "    for epoch in range(n_epochs):",
        "        model.train()",
        "        for step, (inputs, labels) in enumerate(train_loader):",
        "            e = epoch + step / steps",
        "            set_lr(optimizer, e)",
        f"            {step}",
        "            optimizer.zero_grad()",
        "            loss = loss_fn(model(inputs.to(device)), labels.to(device))",
        "            loss.backward()",
        "            optimizer.step()",
        *("    " + s for s in finish),
        "    return model",
        "",
    ]
    return "\n".join(lines)


_PLAIN_TRAIN = plain_train_source(
    params="", doc="Train with the recipe's pruning and LR schedule; returns the pruned model.",
    setup=["pruner = GMPPruner(model)", "model.to(device)"], step="pruner.step(e)",
    finish=["pruner.step(max(float(n_epochs), END_EPOCH))", "pruner.finalize()"])
"""The training loop that applies the schedule."""


def _pytorch_plain(rec: Optimization, recipe_path: str) -> str:
    return (_header(rec, "pytorch-plain", recipe_path) + _schedule_source(rec) + _PLAIN_USAGE + _PLAIN_MODULES
            + _PLAIN_PRUNER + _PLAIN_TRAIN)


def _keras(rec: Optimization, recipe_path: str) -> str:
    body = textwrap.dedent('''
    # Keras with tensorflow_model_optimization (pip install tensorflow-model-optimization).
    # PolynomialDecay(power=3) is the same cubic GMP schedule, counted in optimizer steps.
    # Layer names: the ONNX weight name with "/kernel" and ":0" stripped; edit LAYERS[...]["module"] if needed.
    import tensorflow as tf
    import tensorflow_model_optimization as tfmot


    def prune_model(model, steps_per_epoch):
        """A clone of `model` with prune_low_magnitude wrappers on the recipe's layers."""
        names = {l.name for l in model.layers}
        wanted = {}
        for layer in LAYERS:
            parts = layer["weight"].split(":")[0].split("/")
            match = next((p for p in parts if p in names), None) or layer["module"]
            wanted[match] = layer["sparsity"]

        def clone(layer):
            if layer.name in wanted:
                final = wanted[layer.name]
                schedule = tfmot.sparsity.keras.PolynomialDecay(
                    initial_sparsity=min(INIT_SPARSITY, final), final_sparsity=final,
                    begin_step=int(START_EPOCH * steps_per_epoch), end_step=int(END_EPOCH * steps_per_epoch),
                    power=3, frequency=max(1, int(UPDATE_FREQUENCY * steps_per_epoch)))
                return tfmot.sparsity.keras.prune_low_magnitude(layer, pruning_schedule=schedule)
            return layer

        return tf.keras.models.clone_model(model, clone_function=clone)


    def fit(model, train_data, steps_per_epoch, loss, optimizer=None, **fit_kwargs):
        """Compile and fit with pruning + LR schedule; returns the model with pruning wrappers stripped."""
        pruned = prune_model(model, steps_per_epoch)
        pruned.compile(optimizer=optimizer or tf.keras.optimizers.SGD(), loss=loss, **fit_kwargs.pop("compile", {}))
        callbacks = [tfmot.sparsity.keras.UpdatePruningStep(),
                     tf.keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr_at(epoch, default_lr=lr))]
        pruned.fit(train_data, epochs=int(math.ceil(TOTAL_EPOCHS)), steps_per_epoch=steps_per_epoch,
                   callbacks=callbacks, **fit_kwargs)
        return tfmot.sparsity.keras.strip_pruning(pruned)
    ''')
    return _header(rec, "keras", recipe_path) + _schedule_source(rec) + body


def _tensorflow(rec: Optimization, recipe_path: str) -> str:
    body = textwrap.dedent('''
    # TensorFlow 2 custom training loop: kernels masked by magnitude on the recipe's GMP schedule (no tfmot).
    # Variable names: ONNX weight name with ":0" stripped is matched against the end of variable.name;
    # edit LAYERS[...]["module"] if needed.
    import tensorflow as tf


    class MagnitudeMasker:
        """Keeps one mask per pruned kernel; call step(epoch) each batch and apply() after each optimizer step."""

        def __init__(self, model):
            self.items = []
            for layer in LAYERS:
                key = layer["weight"].split(":")[0]
                var = next((v for v in model.trainable_variables if v.name.split(":")[0].endswith(key)), None)
                if var is None:
                    raise ValueError(f"no variable for ONNX weight {layer['weight']!r}: edit LAYERS")
                self.items.append([var, layer["sparsity"], tf.ones_like(var), -1.0])

        def step(self, epoch):
            for item in self.items:
                var, final, _, current = item
                target = sparsity_at(epoch, final)
                if target > 0 and target != current:
                    flat = tf.reshape(tf.abs(var * item[2]), [-1])
                    k = int(round(target * int(flat.shape[0])))
                    threshold = tf.sort(flat)[k - 1] if k > 0 else -1.0
                    item[2] = tf.cast(tf.abs(var * item[2]) > threshold, var.dtype)
                    item[3] = target
            self.apply()

        def apply(self):
            for var, _, mask, current in self.items:
                if current > 0:
                    var.assign(var * mask)


    def train(model, dataset, steps_per_epoch, loss_fn, optimizer):
        masker = MagnitudeMasker(model)
        for epoch in range(int(math.ceil(TOTAL_EPOCHS))):
            lr = lr_at(epoch)
            if lr is not None:
                optimizer.learning_rate.assign(lr)
            for step, (x, y) in enumerate(dataset.take(steps_per_epoch)):
                masker.step(epoch + step / steps_per_epoch)
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x, training=True))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                masker.apply()
        masker.step(END_EPOCH)
        return model
    ''')
    return _header(rec, "tensorflow", recipe_path) + _schedule_source(rec) + body


def generate_code(rec: Optimization, framework: str, recipe_path: str = "recipe.yaml") -> str:
    """Integration code (Python source text) of an unstructured (GMP) optimization for ``framework`` in
    :data:`FRAMEWORKS`; other structures write theirs with their ``integration_code``.

    Raises ``ValueError`` for an unknown framework.
    """
    makers = {"pytorch": _pytorch_sparseml, "pytorch-plain": _pytorch_plain, "keras": _keras,
              "tensorflow": _tensorflow}
    if framework not in makers:
        raise ValueError(f"unknown framework {framework!r}: use one of {', '.join(FRAMEWORKS)}")
    return makers[framework](rec, str(recipe_path))


def code_warnings(rec: Optimization) -> List[str]:
    """Warnings shown with an export (same as the recipe's)."""
    return recipe_warnings(rec)


__all__ = ["FRAMEWORKS", "generate_code", "code_warnings"]
