"""Operating a loaded artifact on a device: ``verify`` (test vectors), ``deploy``
(install, rollback), ``inspect`` (the manifest as a table), ``soak`` (the board as it
heats, plotted by ``svgplot``). The only folder besides ``commands/`` above ``Model``;
imported by commands, never by the runtime."""
