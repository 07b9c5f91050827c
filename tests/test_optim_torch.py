"""Manual check (opt-in): run the generated plain-PyTorch code against a small torch model.

torch is not a dependency, so this is skipped unless ``SPARSIFY_TUI_TORCH_PYTHON`` names a Python that has
torch and onnx (e.g. ``SPARSIFY_TUI_TORCH_PYTHON=/work/torchvenv/bin/python``). The torch side runs in a
subprocess of that Python; the recipe/code side runs here.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

TORCH_PY = os.environ.get("SPARSIFY_TUI_TORCH_PYTHON")
pytestmark = pytest.mark.skipif(not TORCH_PY, reason="set SPARSIFY_TUI_TORCH_PYTHON to a Python with torch")

MODEL_SRC = textwrap.dedent('''
    import torch
    class Net(torch.nn.Module):
        def __init__(self, bn):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.bn1 = torch.nn.BatchNorm2d(16) if bn else torch.nn.Identity()
            self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
            self.conv3 = torch.nn.Conv2d(32, 32, 3, padding=1)
            self.fc = torch.nn.Linear(32, 10)
        def forward(self, x):
            x = torch.relu(self.bn1(self.conv1(x)))
            x = torch.relu(self.conv2(x))
            x = torch.relu(self.conv3(x))
            return self.fc(x.mean((2, 3)))
''')

EXPORT = MODEL_SRC + textwrap.dedent('''
    import sys
    torch.manual_seed(0)
    bn = sys.argv[2] == "bn"
    m = Net(bn).eval()
    torch.save(m.state_dict(), sys.argv[1] + ".pt")
    torch.onnx.export(m, torch.randn(1, 3, 16, 16), sys.argv[1], dynamo=False, opset_version=17)
''')

TRAIN = MODEL_SRC + textwrap.dedent('''
    import importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("gen", sys.argv[1])
    gen = importlib.util.module_from_spec(spec); spec.loader.exec_module(gen)
    m = Net(sys.argv[3] == "bn"); m.load_state_dict(torch.load(sys.argv[2]))
    data = [(torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))) for _ in range(5)]
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    gen.train(m, opt, data, torch.nn.functional.cross_entropy)
    names = {mod: name for name, mod in m.named_modules()}
    out = {"sparsity": {}, "lr": opt.param_groups[0]["lr"]}
    pruner_layers = gen.resolve_modules(m, verbose=False)
    for module, final, onnx_name in pruner_layers:
        out["sparsity"][onnx_name] = [float((module.weight == 0).float().mean()), final, names[module]]
    print(json.dumps(out))
''')


@pytest.mark.parametrize("variant", ["named", "bn"])
def test_generated_plain_pytorch_prunes_a_torch_model(tmp_path, variant):
    from sparsify_tui.analysis.nodes import analyze_model
    from sparsify_tui.optimization.core import build_optimization
    from sparsify_tui.optimization.integration import generate_code
    from sparsify_tui.optimization.schedule import lr_at

    onnx_path = tmp_path / "net.onnx"
    (tmp_path / "export.py").write_text(EXPORT)
    subprocess.run([TORCH_PY, str(tmp_path / "export.py"), str(onnx_path), variant], check=True)
    a = analyze_model(str(onnx_path))
    from sparsify_tui.optimization.config import Settings

    # the first layer is dense by default; include it so the BN-folded (anonymous) conv1 is pruned too
    rec = build_optimization("t", a, None, None, sparsity=0.8, settings=Settings(dense_first_layer=False),
                             training={"epochs": 6, "init_lr": 0.1, "final_lr": 0.01})
    from sparsify_tui.optimization.core import override

    rec = override(rec, rec.layers[0].weight_name, 0.5)  # make sure the first layer is pruned
    code = tmp_path / "gen.py"
    code.write_text(generate_code(rec, "pytorch-plain", "r.yaml"))
    (tmp_path / "train.py").write_text(TRAIN)
    res = subprocess.run([TORCH_PY, str(tmp_path / "train.py"), str(code), str(onnx_path) + ".pt", variant],
                         check=True, capture_output=True, text=True)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["sparsity"], "no layer pruned"
    for onnx_name, (got, final, module) in out["sparsity"].items():
        assert got == pytest.approx(final, abs=0.01), (onnx_name, module)
    assert out["lr"] == pytest.approx(lr_at(rec.epochs.total_epochs - 1 + 4 / 5, rec.lr_modifiers))
    if variant == "named":
        assert all(v[2] + ".weight" == k for k, v in out["sparsity"].items())
    else:  # BatchNorm folded by the exporter: anonymous names, mapped by order and shape
        assert any(k.startswith("onnx::") for k in out["sparsity"])
        assert "# WARNING:" in code.read_text()
