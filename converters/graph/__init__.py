"""ONNX graph helpers every stage may use: names, opset forms, shapes, I/O specs, the
validity check run after each stage. They import nothing else of the converters (the lowest layer)."""
