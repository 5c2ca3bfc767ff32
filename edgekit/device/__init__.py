"""The board: sysfs and proc read under a configurable root (bounded reads), thermal and
power state, power sensors and measured energy, what this CPU's int8 kernels can be trusted
with. Imports only ``edgekit.errors`` and ``edgekit.targets``: knows no model."""
