"""Studies and stress tools: cross-ISA fidelity, fuzzing and resource bombs, the fake-board soak,
the newcomer replay. Each is a script (``python tools/studies/x.py``); tests import a few helpers
(``perturb_weight``, ``resource_bombs``, ``soak_fake_board``)."""
