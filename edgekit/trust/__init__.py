"""Who may sign what: Ed25519 signatures over the canonical manifest (``signing``), the
keys a device trusts (``keys``), the release a signature binds and the device's pins
(``release``). Imports only ``edgekit.errors``: knows no artifact layout."""
