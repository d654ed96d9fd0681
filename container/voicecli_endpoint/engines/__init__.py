"""Synthesis engines behind one interface: `onnx` (kokoro-onnx, the CPU default) and `torch` (the kokoro package)."""
