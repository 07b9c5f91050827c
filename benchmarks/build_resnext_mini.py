#!/usr/bin/env python3
"""Build ``resnext_mini.onnx``: a model with grouped convolutions for the channel benchmarks (grouped convs are
pruned equally in every conv group). A ResNet stem and 4 ResNeXt bottlenecks (1×1 → 3×3 ``groups=32`` → 1×1, with
BatchNorm and residual joins; Xie et al., "Aggregated Residual Transformations for Deep Neural Networks", CVPR
2017), widths 128 and 256, then a 1000-way Linear; random weights (seed 0, BatchNorm statistics randomised so the
layers differ), input [batch, 3, 224, 224], opset 17, the TorchScript exporter.

Usage (needs torch: ``pip install torch==2.13.0 onnx``, the local CPU build; any other version pulls CUDA):
    python benchmarks/build_resnext_mini.py OUT_DIR
then ``SPARSIFY_TUI_BUILT_MODELS=OUT_DIR python benchmarks/channel_pruning.py --models resnext_mini``.
"""

import sys
from pathlib import Path

import torch
import torch.nn as nn


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, cout: int, groups: int, stride: int = 1):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.c2, self.b2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False), nn.BatchNorm2d(width)
        self.c3, self.b3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None if (cin == cout and stride == 1) else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNeXtMini(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layer1 = nn.Sequential(Bottleneck(64, 128, 256, 32), Bottleneck(256, 128, 256, 32))
        self.layer2 = nn.Sequential(Bottleneck(256, 256, 512, 32, 2), Bottleneck(512, 256, 512, 32))
        self.fc = nn.Linear(512, 1000)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "built-models")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = ResNeXtMini().eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.data.uniform_(0.5, 1.5)
            m.running_var.data.uniform_(0.5, 1.5)
            m.running_mean.data.normal_(0, 0.1)
    path = out / "resnext_mini.onnx"
    torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), str(path), opset_version=17, dynamo=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
