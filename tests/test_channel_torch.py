"""Manual check (opt-in): the generated plain-PyTorch code of a channel optimization runs Torch-Pruning on a small
torch model and leaves every group with the channel counts sparsify-tui planned (issue 13, item 5).

Skipped unless ``SPARSIFY_TUI_TORCH_PYTHON`` names a Python with torch, onnx and torch-pruning (e.g.
``SPARSIFY_TUI_TORCH_PYTHON=/work/torchenv/bin/python``; ``pip install torch-pruning`` there, not in the project).
The torch side runs in a subprocess of that Python; the optimization side runs here, through the services.
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
    from torch import nn

    class Net(nn.Module):
        """conv-BN stem, a residual block, a depthwise-separable block and a linear head."""
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(32)
            self.conv3 = nn.Conv2d(32, 64, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(64)
            self.conv4 = nn.Conv2d(64, 32, 1, bias=False)
            self.bn4 = nn.BatchNorm2d(32)
            self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False)
            self.bn5 = nn.BatchNorm2d(32)
            self.pw = nn.Conv2d(32, 48, 1, bias=False)
            self.bn6 = nn.BatchNorm2d(48)
            self.fc = nn.Linear(48, 10)

        def forward(self, x):
            x = torch.relu(self.bn1(self.conv1(x)))
            y = torch.relu(self.bn2(self.conv2(x)))
            z = torch.relu(self.bn3(self.conv3(y)))
            y = torch.relu(self.bn4(self.conv4(z)) + y)          # residual: conv2 and conv4 outputs coupled
            y = torch.relu(self.bn5(self.dw(y)))                  # depthwise: tied to its input channels
            y = torch.relu(self.bn6(self.pw(y)))
            return self.fc(y.mean((2, 3)))
''')

EXPORT = MODEL_SRC + textwrap.dedent('''
    import sys
    torch.manual_seed(0)
    m = Net().eval()
    for mod in m.modules():  # non-trivial BatchNorm statistics
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1); mod.running_var.uniform_(0.5, 1.5); mod.weight.data.uniform_(0.5, 1.5)
    torch.save(m.state_dict(), sys.argv[1] + ".pt")
    torch.onnx.export(m, torch.randn(1, 3, 16, 16), sys.argv[1], dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
''')

TRAIN = MODEL_SRC + textwrap.dedent('''
    import importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("gen", sys.argv[1])
    gen = importlib.util.module_from_spec(spec); spec.loader.exec_module(gen)
    m = Net(); m.load_state_dict(torch.load(sys.argv[2]))
    torch.manual_seed(1)
    data = [(torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))) for _ in range(3)]
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    example = torch.randn(1, 3, 16, 16)
    modules = gen.resolve_layers(m, verbose=False)  # Torch-Pruning thins these modules in place
    m = gen.train(m, opt, data, torch.nn.functional.cross_entropy, example)
    names = {mod: name for name, mod in m.named_modules()}
    out = {"groups": {}, "onnx": gen.export_onnx(m, example, sys.argv[3])}
    for g in gen.GROUPS:
        mod = modules[g["layer"]]
        out["groups"][g["id"]] = [int(mod.out_channels), g["kept"], names[mod]]
    out["fc_in"] = int(m.fc.in_features)
    print(json.dumps(out))
''')


@pytest.mark.parametrize("target", ["uniform", "speedup"])
def test_torch_pruning_code_keeps_the_planned_channels(tmp_path, workspace_home, target):
    import onnx

    from sparsify_tui.optimization.export import write_export
    from sparsify_tui.services import optimizations
    from sparsify_tui.services.projects import create_project
    from sparsify_tui.store import Workspace

    onnx_path = tmp_path / "net.onnx"
    (tmp_path / "export.py").write_text(EXPORT)
    subprocess.run([TORCH_PY, str(tmp_path / "export.py"), str(onnx_path)], check=True)
    ws = Workspace()
    pid = create_project(ws, str(onnx_path), name="net")["id"]
    ws.update_project(pid, training={"optimizer": "SGD", "epochs": 6, "init_lr": 0.1, "final_lr": 0.01})
    settings = {"structure": "channel", "round_to": 8, "dense_first_layer": False}
    if target == "speedup":
        settings.update(target="macs", macs_reduction=2.0)
    rec = optimizations.create_optimization(ws, pid, "c", sparsity=0.5, settings=settings)
    planned = {l.weight_name: l.kept for l in rec.layers if l.prunable and l.sparsity > 0}
    assert planned, "nothing thinned"
    code = tmp_path / "gen.py"
    write_export(rec, recipe_path=tmp_path / "r.yaml", framework="pytorch-plain", code_path=code)
    (tmp_path / "train.py").write_text(TRAIN)
    out_onnx = tmp_path / "thinned.onnx"
    res = subprocess.run([TORCH_PY, str(tmp_path / "train.py"), str(code), str(onnx_path) + ".pt", str(out_onnx)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(out["groups"]) == set(planned)
    for gid, (got, kept, module) in out["groups"].items():
        assert got == kept == planned[gid], (gid, module)
    # the ONNX model the code exports has those channel counts too
    m = onnx.load(str(out_onnx))
    conv_out = sorted(int(t.dims[0]) for t in m.graph.initializer if len(t.dims) == 4)
    assert all(k in conv_out for k in planned.values())
