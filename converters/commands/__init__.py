"""Host-only ``edgekit`` commands: build, estimate, calibrate-host, emulate.

Each module exposes a click command named ``command``; the device CLI knows them by name
(``edgekit.commands.HOST_COMMANDS``) and imports one only when it runs where the host tools
are installed.
"""
