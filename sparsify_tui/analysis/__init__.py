"""Pure functions on ONNX models: loading (external data, >2 GB), shape inference, the node table with
params/MACs/FLOPs, valid synthetic inputs, and system info. Never imports Textual.

Submodules: ``loading`` (load_model), ``shapes`` (symbolic dims), ``flops`` (MACs/FLOPs per op type),
``nodes`` (analyze_model, NodeInfo, ModelAnalysis, prunable_layers), ``inputs`` (InputSpec,
input_specs, synthetic_inputs, load_sample_data), ``system`` (system_info).
"""
