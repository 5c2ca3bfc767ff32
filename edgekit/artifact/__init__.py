"""The ``.edgekit`` file, read as untrusted input: the bounded zip reader (``zipread``),
the typed manifest (``manifest``, ``manifest_records``, ``manifest_fields``), the ONNX
scan without onnx (``onnx_scan``), the test vectors (``vectors``), the memory bounds
(``memory_budget``) and the archive itself (``archive``: read, write). Imports ``trust/``
and ``device/``, never a backend or the runtime."""
