"""Per-layer accuracy records and the HTML report (``edgekit report``).

``layers``: each compute layer's precision and output SQNR, recorded at build time into the
manifest's ``layers`` list; ``why``: why a layer stayed wider than int8; ``svg``: small
self-contained charts; ``html``: the report page, one file with everything inlined.
"""
