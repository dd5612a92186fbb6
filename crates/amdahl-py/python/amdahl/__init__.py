"""amdahl from Python: measure the energy and carbon of code as it runs, project a whole run's
cost from its first steps, and call the models (``plan``, ``infer``, ``serve``, ``fit``,
``carbon``, ``calibrate``).

Everything is computed by the Rust crates of amdahl (the same code as the ``amdahl`` command,
which this package installs too); results are the commands' versioned JSON schemas as dicts.
See docs/usage/python.md.
"""

from ._native import AmdahlError, __version__
from ._model import calibrate, carbon, fit, infer, plan, serve
from ._tracker import Tracker, track

__all__ = ["__version__", "AmdahlError", "Tracker", "track", "plan", "infer", "serve", "fit", "carbon", "calibrate"]
