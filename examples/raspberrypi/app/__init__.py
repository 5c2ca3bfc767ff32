"""The Raspberry Pi image-classification service behind ``classify_service.py``.

``board``: which Pi this is and whether the artifact was built for it; ``sources``: camera
or image frames; ``frames``: frames to model inputs; ``service``: the submit / stats loop.
"""
