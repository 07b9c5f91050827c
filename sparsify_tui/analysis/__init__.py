"""Pure functions on ONNX models: loading (external data, >2 GB), shape inference, the node table with
params/MACs/FLOPs, valid synthetic inputs, and system info. Never imports Textual or a runtime.

Submodules: ``graph`` (the node id, the subgraph walk, GraphNode), ``layers`` (the prunable-layer rule,
find_layers), ``loading`` (load_model, the IR-version rule), ``shapes`` (symbolic dims), ``flops``
(MACs/FLOPs per op type), ``nodes`` (analyze_model, NodeInfo, ModelAnalysis, prunable_layers),
``inputs`` (InputSpec, input_specs, synthetic_inputs, load_sample_data), ``system`` (available_cores,
machine_info; ``sparsify_tui.engine.system_info`` adds the runtime).
"""
