"""Containment of the sandbox child: landlock, process tree, rlimits and the watch on them."""
