"""sparsify-tui: analyze and optimize ONNX models on the server they deploy to."""

__version__ = "0.1.0"
