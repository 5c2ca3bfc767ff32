"""PyTorch sources for the ``export`` stage: resolving them, their example inputs, ONNX export.

``source``  turns what the user named (``module:callable``, ``file.py:Name``, ``.pt``, ``.pt2``, an
            ``nn.Module``) into an eval-mode model, with ``--weights`` applied.
``inputs``  the example inputs an export traces with, checked against the model.
``onnx_export`` torch -> ONNX: the dynamo exporter first, the TorchScript exporter as fallback.

torch is imported inside functions only: importing this package stays light.
"""
