"""Plumbing of a build: the onnxruntime runner with its cache, the user cache folder, the
content key, who built it, Ctrl-C handling. Above ``graph/`` and ``context``, below every library."""
