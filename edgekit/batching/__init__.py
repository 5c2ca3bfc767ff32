"""``Model.submit``: the batcher (``batcher``), its rule per power state
(``batch_policy``), its wait decision from arrivals (``arrivals``), requests and their
joining (``batch_requests``, ``per_row``). Sees the model only through
``runtime.session.SessionLike``; never imports ``Model``."""
