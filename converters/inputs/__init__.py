"""The build's data: calibration/validation datasets read from files or arrays, their
checks (shapes, value range, trained weights), and calibration sharded over an executor."""
