"""``councilzoo view OUT``: a local page that shows what happened in an output folder.

The protocols' table and accuracy-cost frontier, every episode as a conversation, one problem
across protocols, training curves per member and TRACER's controller policies. ``folder`` reads
the folder; ``server`` serves it with the page in ``static/`` (plain JavaScript, no build step,
nothing fetched from the network). See docs/viewer.md.
"""

from councilzoo.viewer.folder import OutputFolder
from councilzoo.viewer.server import ViewerServer, serve

__all__ = ["OutputFolder", "ViewerServer", "serve"]
