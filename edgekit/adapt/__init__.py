"""Adapting the thread count: policies (``policy``), timing sessions side by side
(``probe``), other models' threads alongside (``sharing``), the tuner thread that re-picks
and swaps sessions (``tuner``). Sees the model only through ``runtime.session.SessionLike``;
never imports ``Model`` or the batcher."""
