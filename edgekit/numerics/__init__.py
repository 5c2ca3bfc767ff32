"""Counting and checking tensor values, numpy only: NaN/inf (``finite``), values outside
an int8 grid (``clip_counts``, the drift watch ``drift``), SQNR (``sqnr``). Shared by the
backends' input writes, the session and the host's build; imports only ``artifact/``
records (types) and ``edgekit.errors``."""
