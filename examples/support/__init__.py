"""Code the examples import, not examples themselves (every ``examples/*.py`` is a runnable example).

* ``posekit``: a stand-in for a user's camera-geometry library (plain ``torch.linalg``), which
  ``dropin_camera.py`` and ``tests/test_routing.py`` run unmodified with ``mpslinalg.enable()``.
* ``devices``: the examples' ``--device`` argument, which says so when a device is not there.
"""
