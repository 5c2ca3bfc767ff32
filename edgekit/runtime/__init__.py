"""One model running: the options of ``edgekit.load`` (``options``: ``RuntimeOptions``
and the one ``BackendOptions`` rule), the session with its live backend (``session``),
the execution recorder and ``stats()`` (``stats``), image preprocessing (``preprocess``),
run time bounds (``run_bounds``). Imports backends, numerics, artifact, device; never the
tuner, the batcher or ``Model``."""
